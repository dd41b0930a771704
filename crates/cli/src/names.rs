//! Table and protocol names: iproute2's built-ins plus `/etc/iproute2/{rt_tables,rt_protos}`
//! and their `.d/*.conf` drop-ins, read once per process.

use std::path::Path;
use std::sync::OnceLock;

use mpt_model::names as builtin;

/// Where iproute2 keeps its id files.
pub const IPROUTE2_DIR: &str = "/etc/iproute2";

fn read_ids(base: &str) -> Vec<(u32, String)> {
    let mut v = Vec::new();
    for dir in [IPROUTE2_DIR, "/usr/share/iproute2", "/usr/lib/iproute2"] {
        if let Ok(s) = std::fs::read_to_string(Path::new(dir).join(base)) {
            v.extend(builtin::parse_id_file(&s));
        }
        if let Ok(rd) = std::fs::read_dir(Path::new(dir).join(format!("{base}.d"))) {
            let mut files: Vec<_> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect();
            files.sort();
            for f in files {
                if let Ok(s) = std::fs::read_to_string(f) {
                    v.extend(builtin::parse_id_file(&s));
                }
            }
        }
    }
    v
}

fn tables() -> &'static [(u32, String)] {
    static T: OnceLock<Vec<(u32, String)>> = OnceLock::new();
    T.get_or_init(|| read_ids("rt_tables"))
}

fn protos() -> &'static [(u32, String)] {
    static P: OnceLock<Vec<(u32, String)>> = OnceLock::new();
    P.get_or_init(|| read_ids("rt_protos"))
}

/// Table id for a name or number.
pub fn table_id(s: &str) -> Option<u32> {
    builtin::table_id(s).or_else(|| tables().iter().find(|(_, n)| n == s).map(|(i, _)| *i))
}

/// Table name for display (iproute2's name, else the number).
pub fn table_name(id: u32) -> String {
    tables()
        .iter()
        .find(|(i, _)| *i == id)
        .map_or_else(|| builtin::table_name(id), |(_, n)| n.clone())
}

/// Protocol number for a name or number.
pub fn proto_id(s: &str) -> Option<u8> {
    builtin::proto_id(s).or_else(|| {
        protos()
            .iter()
            .find(|(_, n)| n == s)
            .and_then(|(i, _)| u8::try_from(*i).ok())
    })
}

/// Protocol name for display.
pub fn proto_name(id: u8) -> String {
    protos()
        .iter()
        .find(|(i, _)| *i == u32::from(id))
        .map_or_else(|| builtin::proto_name(id), |(_, n)| n.clone())
}

/// Register `NUMBER NAME` in `/etc/iproute2/rt_protos.d/NAME.conf` so that `ip route` prints
/// the name. Idempotent; returns whether a file was written. Looked at once per invocation
/// (a batch's every route line asks).
pub fn register_proto(id: u8, name: &str) -> std::io::Result<bool> {
    static SEEN: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.contains(&id) {
        return Ok(false);
    }
    let wrote = register_proto_file(id, name)?;
    seen.push(id);
    Ok(wrote)
}

fn register_proto_file(id: u8, name: &str) -> std::io::Result<bool> {
    let dir = Path::new(IPROUTE2_DIR).join("rt_protos.d");
    let file = dir.join(format!("{name}.conf"));
    let line = format!("{id}\t{name}\n");
    if std::fs::read_to_string(&file).is_ok_and(|s| s.contains(line.trim_end())) {
        return Ok(false);
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        &file,
        format!("# Registered by {name}: routes it owns carry this protocol.\n{line}"),
    )?;
    Ok(true)
}

/// Every table name: iproute2's built-ins, then the files' (for completion).
pub fn table_names() -> Vec<String> {
    use builtin::{RT_TABLE_DEFAULT, RT_TABLE_LOCAL, RT_TABLE_MAIN};
    let mut v: Vec<String> = [RT_TABLE_MAIN, RT_TABLE_LOCAL, RT_TABLE_DEFAULT]
        .into_iter()
        .map(builtin::table_name)
        .collect();
    v.extend(tables().iter().map(|(_, n)| n.clone()));
    dedup_names(v)
}

/// Every route protocol name: iproute2's built-ins, then the files' (for completion).
pub fn proto_names() -> Vec<String> {
    let mut v: Vec<String> = (0..=u8::MAX)
        .map(builtin::proto_name)
        .filter(|n| n.parse::<u8>().is_err())
        .collect();
    v.extend(protos().iter().map(|(_, n)| n.clone()));
    dedup_names(v)
}

fn dedup_names(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|n| n.parse::<u32>().is_err() && seen.insert(n.clone()));
    v
}
