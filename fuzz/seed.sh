#!/usr/bin/env bash
# Seeds each target's corpus from the shared corpus, the fixtures and the examples, under
# fuzz/corpus/<target> (not committed: it grows as the fuzzer finds new inputs). Inputs that
# once crashed a target stay in fuzz/regressions/<target> and are replayed by .ci/run.
set -euo pipefail
cd "$(dirname "$0")"
root=..
shared=${CRDCTL_SHARED:-$root/../shared}
mkdir -p corpus/load corpus/check corpus/review corpus/request corpus/prune corpus/power_loss corpus/protobuf corpus/strategic_merge corpus/credentials

n=0
for file in "$shared"/corpus/real/*.yaml "$shared"/corpus/pairs/*/*.yaml "$root"/fixtures/pairs/*/*.yaml "$root"/examples/crontab/*.yaml; do
  [ -f "$file" ] || continue
  n=$((n + 1))
  cp "$file" "corpus/load/seed-$n.yaml"
done

n=0
for pair in "$shared"/corpus/pairs/*/ "$root"/fixtures/pairs/*/; do
  [ -f "$pair/old.yaml" ] && [ -f "$pair/new.yaml" ] || continue
  n=$((n + 1))
  { cat "$pair/old.yaml"; printf '\0'; cat "$pair/new.yaml"; } > "corpus/check/seed-$n"
done

cat > corpus/review/seed-v1 <<'JSON'
{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"uid-1","result":{"status":"Success"},"convertedObjects":[{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"a","namespace":"default","uid":"u-1","labels":{"x":"y"}},"host":"h","port":"1"},{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"b"}}]}}
JSON
cat > corpus/review/seed-failed <<'JSON'
{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","response":{"uid":"uid-1","result":{"status":"Failure","message":"no"}}}
JSON

printf '%s' '{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"a","labels":{"a":"b"}},"spec":{"n":[1,2.5,"x",null,true]}}' > corpus/request/seed-json
printf 'apiVersion: example.com/v1\nkind: CronTab\nmetadata: {name: a}\nspec: &s {n: [1, *s]}\n' > corpus/request/seed-yaml
printf '%s' 'env in (prod,staging),!canary,tier=web,app notin (x)' > corpus/request/seed-labels
printf '%s' 'metadata.name=a,metadata.namespace!=b,status.phase==Running' > corpus/request/seed-fields
printf '%s' '{"apiVersion":"example.com/v1","kind":"K","metadata":{"name":"a","labels":null},"spec":{"replicas":null,"ports":[null,{}],"env":{"A":null},"free":{"u":1},"x":1}}' > corpus/prune/seed-object
printf '%s' '{"spec":{"template":{"apiVersion":"v1","metadata":{},"spec":{"a":null,"b":1},"junk":2}},"status":{"any":[1]}}' > corpus/prune/seed-embedded
# Power loss: a cut point and a seed (10 bytes), then pairs of bytes, one write each.
printf '\x05\x00\x01\x02\x03\x04\x05\x06\x07\x08\x00\x10\x01\x80\x02\x40\x08\x20\x09\x30\x10\x05\x11\x06' > corpus/power_loss/seed-short
printf '\x40\x01\xff\xee\xdd\xcc\xbb\xaa\x99\x88\x00\x3f\x01\x3f\x02\x3f\x08\x3f\x09\x3f\x10\x01\x11\x01\x00\x02\x08\x7f' > corpus/power_loss/seed-pages
echo "seeded: $(ls corpus/load | wc -l) load, $(ls corpus/check | wc -l) check, $(ls corpus/review | wc -l) review, $(ls corpus/request | wc -l) request, $(ls corpus/prune | wc -l) prune, $(ls corpus/power_loss | wc -l) power_loss"
# A ConfigMap in the protobuf envelope: k8s\0, Unknown{typeMeta{v1, ConfigMap}, raw{metadata{name: a}, data{k: v}}}.
printf '\x6b\x38\x73\x00\x0a\x0f\x0a\x02\x76\x31\x12\x09\x43\x6f\x6e\x66\x69\x67\x4d\x61\x70\x12\x0d\x0a\x03\x0a\x01\x61\x12\x06\x0a\x01\x6b\x12\x01\x76' > corpus/protobuf/seed-config-map
# A Deployment, NUL, a strategic merge patch with each directive.
printf '%s\0%s' \
  '{"metadata":{"name":"web","labels":{"a":"b"},"finalizers":["x"]},"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}},"template":{"spec":{"containers":[{"name":"web","image":"a","env":[{"name":"A","value":"1"}],"ports":[{"containerPort":80}]},{"name":"side","image":"b"}]}}}}' \
  '{"metadata":{"labels":{"a":null,"c":"d"},"$deleteFromPrimitiveList/finalizers":["x"]},"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"},"template":{"spec":{"$setElementOrder/containers":[{"name":"side"},{"name":"web"}],"containers":[{"name":"web","image":"c","env":[{"name":"A","$patch":"delete"},{"name":"B","value":"2"}]}]}}}}' \
  > corpus/strategic_merge/seed-deployment
# Credentials: signed claims (0), a token file (1), and header lines.
printf '\x00{"sub":"system:serviceaccount:ns:sa","exp":99999999999,"kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"sa","uid":"u"}}}' > corpus/credentials/seed-claims
printf '\x01t1,jane,u-1,"dev,ops"\nt2,bob\n,empty,u\n"unterminated,x,y\n' > corpus/credentials/seed-token-file
printf 'authorization: Bearer admin\nimpersonate-user: system:serviceaccount:ns:sa\nimpersonate-group: dev\nimpersonate-extra-scopes%%2Fa: x\n' > corpus/credentials/seed-headers
