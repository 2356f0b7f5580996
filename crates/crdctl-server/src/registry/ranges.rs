//! The shared ranges objects draw from — Services' ClusterIPs and node ports — and what a
//! write reserved from them: keys in the store, created only if absent, deleted again if the
//! write fails.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

use crdctl_storage::{Store, StoreError};

/// An IPv4 CIDR (`10.96.0.0/12`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    base: u32,
    prefix: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let invalid = || format!("{text:?} is not an IPv4 CIDR (such as 10.96.0.0/12)");
        let (address, prefix) = text.split_once('/').ok_or_else(invalid)?;
        let address: Ipv4Addr = address.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().ok().filter(|p| (1..=30).contains(p)).ok_or_else(invalid)?;
        let mask = u32::MAX << (32 - prefix);
        Ok(Cidr { base: u32::from(address) & mask, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

impl Cidr {
    /// How many addresses can be handed out: all but the network and broadcast addresses.
    pub(crate) fn usable(&self) -> u32 {
        (1u32 << (32 - self.prefix)).saturating_sub(2)
    }

    /// The `n`th usable address (from 0).
    pub(crate) fn nth(&self, n: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.base.wrapping_add(1).wrapping_add(n))
    }

    pub(crate) fn contains(&self, address: Ipv4Addr) -> bool {
        let offset = u32::from(address).wrapping_sub(self.base);
        (1..=self.usable()).contains(&offset)
    }
}

/// Where Services' addresses come from (kube-apiserver's `--service-cluster-ip-range` and
/// `--service-node-port-range`).
#[derive(Debug, Clone)]
pub struct ServiceRanges {
    /// ClusterIPs.
    pub cluster_ips: Cidr,
    /// Node ports.
    pub node_ports: RangeInclusive<u16>,
}

impl Default for ServiceRanges {
    fn default() -> ServiceRanges {
        ServiceRanges {
            cluster_ips: Cidr { base: u32::from(Ipv4Addr::new(10, 96, 0, 0)), prefix: 12 },
            node_ports: 30000..=32767,
        }
    }
}

/// What an allocation reserved, to give back if the Service is not written after all.
#[derive(Debug, Default)]
#[must_use]
pub struct Reserved(pub(crate) Vec<String>);

impl Reserved {
    /// Gives back what was reserved (the Service write failed).
    pub async fn release(self, store: &dyn Store) {
        release_keys(store, self.0).await;
    }
}

pub(crate) async fn release_keys(store: &dyn Store, keys: Vec<String>) {
    for key in keys {
        match store.delete(&key, None).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(err) => tracing::warn!(key, error = %err, "cannot release a Service's address"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_count_their_usable_addresses() {
        let cidr: Cidr = "10.96.0.7/29".parse().unwrap();
        assert_eq!(cidr.to_string(), "10.96.0.0/29");
        assert_eq!(
            (cidr.usable(), cidr.nth(0), cidr.nth(5)),
            (6, Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::new(10, 96, 0, 6))
        );
        assert!(cidr.contains(Ipv4Addr::new(10, 96, 0, 6)) && !cidr.contains(Ipv4Addr::new(10, 96, 0, 7)));
        assert!(!cidr.contains(Ipv4Addr::new(10, 96, 0, 0)));
        assert!("10.96.0.0".parse::<Cidr>().is_err() && "10.96.0.0/31".parse::<Cidr>().is_err());
    }
}
