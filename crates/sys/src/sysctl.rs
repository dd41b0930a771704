//! Network settings under `/proc/sys/net`, which follow the network namespace of the thread
//! that opens them.

use crate::Error;

fn path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

/// Read `net.ipv4.ip_forward` and the like (trimmed).
pub fn read(key: &str) -> Result<String, Error> {
    std::fs::read_to_string(path(key))
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::io(format!("read {key}"), e))
}

/// Write a setting.
pub fn write(key: &str, value: &str) -> Result<(), Error> {
    std::fs::write(path(key), value).map_err(|e| Error::io(format!("set {key}={value}"), e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_paths() {
        assert_eq!(
            super::path("net.ipv4.conf.all.ignore_routes_with_linkdown"),
            "/proc/sys/net/ipv4/conf/all/ignore_routes_with_linkdown"
        );
    }
}
