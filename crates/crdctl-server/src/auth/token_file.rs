//! `--token-auth-file`: static bearer tokens in upstream's CSV (`token,user,uid,"group1,group2"`),
//! read as `tokenfile.NewCSV` reads them.

use std::collections::HashMap;
use std::path::Path;

use super::User;

/// Every token in the file at `path`, with its user.
pub fn read(path: &Path) -> Result<HashMap<String, User>, String> {
    let text = std::fs::read(path).map_err(|err| format!("token file '{}': {err}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// Every token in `text`, the contents of the file `shown`, with its user.
pub fn parse(text: &[u8], shown: &str) -> Result<HashMap<String, User>, String> {
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).trim(csv::Trim::Fields).from_reader(text);
    let mut tokens = HashMap::new();
    for (number, record) in reader.records().enumerate() {
        let record = record.map_err(|err| format!("token file '{shown}': {err}"))?;
        if record.len() < 3 {
            return Err(format!(
                "token file '{shown}' must have at least 3 columns (token, user name, user uid), found {}",
                record.len()
            ));
        }
        let column = |n: usize| record.get(n).unwrap_or_default();
        if column(0).is_empty() {
            tracing::warn!(file = %shown, record = number + 1, "empty token in the token file");
            continue;
        }
        let groups: Vec<&str> =
            Some(column(3)).filter(|g| !g.is_empty()).map(|g| g.split(',').collect()).unwrap_or_default();
        let mut user = User::named(column(1), &groups);
        user.uid = column(2).to_string();
        tokens.insert(column(0).to_string(), user);
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_users_and_short_rows_are_refused() {
        let dir = std::env::temp_dir().join(format!("crdctl-tokens-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens.csv");
        std::fs::write(&file, "secret-1,jane,u-1,\"dev,ops\"\nsecret-2, bob ,u-2\n,empty,u-3\n").unwrap();
        let tokens = read(&file).unwrap();
        assert_eq!(tokens["secret-1"].groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!((tokens["secret-2"].name.as_str(), tokens["secret-2"].uid.as_str()), ("bob", "u-2"));
        assert_eq!(tokens.len(), 2, "an empty token is skipped");
        std::fs::write(&file, "secret,jane\n").unwrap();
        let error = read(&file).unwrap_err();
        assert!(error.ends_with("must have at least 3 columns (token, user name, user uid), found 2"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
