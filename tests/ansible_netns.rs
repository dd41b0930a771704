//! The Ansible collection (`ansible/`, `mpt.net`) run for real: a playbook of `mproute_route`
//! tasks against a throwaway namespace with Debian's ansible-core, in check mode, then twice for
//! real, then in check mode again. Oracles: the play recap's counts and `ip -j route`.

use std::path::{Path, PathBuf};
use std::process::Command;

use mpt_testkit::{require_root, Netns, Tool, TwoPaths};
use serde_json::Value;

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");
const MP: Tool = Tool::new(MPROUTE);

/// A directory with the collection where ansible looks for it, and ansible's own files.
struct Site {
    dir: PathBuf,
}

impl Site {
    fn new() -> Site {
        let dir = std::env::temp_dir().join(format!("mpt-ansible-{}", std::process::id()));
        let coll = dir.join("collections/ansible_collections/mpt");
        std::fs::create_dir_all(&coll).expect("collections dir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ansible");
        let link = coll.join("net");
        if !link.exists() {
            std::os::unix::fs::symlink(src.canonicalize().expect("ansible/"), &link)
                .expect("link the collection");
        }
        Site { dir }
    }

    /// `ansible-playbook PLAYBOOK` (with `extra` options); (play recap counts, whole output).
    fn play(&self, playbook: &str, ns: &Netns, extra: &[&str]) -> ((u64, u64, u64), String) {
        let book = self.dir.join("site.yml");
        std::fs::write(&book, playbook).expect("write playbook");
        let home = self.dir.join("home");
        let o = Command::new("ansible-playbook")
            .args(["-i", "localhost,", "-c", "local"])
            .args(["-e", "ansible_python_interpreter=/usr/bin/python3"])
            .args(["-e", &format!("ns={}", ns.name())])
            .args(["-e", &format!("mproute={MPROUTE}")])
            .args(extra)
            .arg(&book)
            .env("ANSIBLE_COLLECTIONS_PATH", self.dir.join("collections"))
            .env("ANSIBLE_HOME", &home)
            .env("ANSIBLE_LOCAL_TEMP", home.join("tmp"))
            .env("ANSIBLE_REMOTE_TEMP", home.join("tmp"))
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
            .output()
            .expect("run ansible-playbook (cargo xtask setup installs ansible-core)");
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let recap = out
            .lines()
            .skip_while(|l| !l.starts_with("PLAY RECAP"))
            .find(|l| l.starts_with("localhost"))
            .unwrap_or_else(|| panic!("no play recap:\n{out}"));
        let count = |k: &str| -> u64 {
            recap
                .split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {k}= in {recap}"))
        };
        ((count("ok"), count("changed"), count("failed")), out)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const PLAYBOOK: &str = r#"
- hosts: localhost
  gather_facts: false
  tasks:
    - name: two paths, flows spread by their 5-tuple
      mpt.net.mproute_route:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        dst: 198.51.100.0/24
        algo: l4-hash
        nexthops:
          - {via: 10.1.0.2, dev: va}
          - {via: 10.2.0.2, dev: vb, weight: 2}
    - name: an IPv6 route in table 100
      mpt.net.mproute_route:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        dst: 2001:db8:99::/48
        table: "100"
        nexthops:
          - {via: "2001:db8:1::2", dev: va}
          - {via: "2001:db8:2::2", dev: vb}
    - name: no route to 203.0.113.0/24
      mpt.net.mproute_route:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        dst: 203.0.113.0/24
        state: absent
"#;

fn routes(ns: &Netns) -> (Value, Value) {
    (
        ns.ip_json(&["-4", "route", "show", "table", "all"]),
        // without the link-local and multicast entries autoconfiguration adds when it gets to it
        Value::Array(
            ns.ip_json(&["-6", "route", "show", "table", "all"])
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| {
                    let d = r["dst"].as_str().unwrap_or("");
                    !(d.starts_with("fe80") || d.starts_with("ff00"))
                })
                .cloned()
                .collect(),
        ),
    )
}

#[test]
fn a_playbook_changes_once_then_nothing_and_check_mode_changes_nothing() {
    require_root();
    let t = TwoPaths::new("ansbl");
    let site = Site::new();
    MP.ok(
        &t.r,
        &[
            "add",
            "203.0.113.0/24",
            "nexthop",
            "via",
            "10.1.0.2",
            "dev",
            "va",
        ],
    );
    let before = routes(&t.r);

    // check mode with diff: all three would change, nothing does
    let ((_, changed, failed), out) = site.play(PLAYBOOK, &t.r, &["--check", "--diff"]);
    assert_eq!((changed, failed), (3, 0), "{out}");
    assert!(
        out.contains("+  \"algo\": \"l4-hash\""),
        "the diff shows the route after:\n{out}"
    );
    assert_eq!(routes(&t.r), before, "check mode changed something:\n{out}");

    // the first run changes all three, as the kernel then says
    let ((_, changed, failed), out) = site.play(PLAYBOOK, &t.r, &[]);
    assert_eq!((changed, failed), (3, 0), "{out}");
    let v4 =
        t.r.ip_json(&["-4", "route", "show", "exact", "198.51.100.0/24"]);
    let nhs = v4[0]["nexthops"].as_array().expect("multipath route");
    let got: Vec<(&str, &str, u64)> = nhs
        .iter()
        .map(|n| {
            (
                n["gateway"].as_str().unwrap_or(""),
                n["dev"].as_str().unwrap_or(""),
                n["weight"].as_u64().unwrap_or(1),
            )
        })
        .collect();
    assert_eq!(got, [("10.1.0.2", "va", 1), ("10.2.0.2", "vb", 2)]);
    assert_eq!(v4[0]["protocol"], "mproute");
    let row = MP.json(&t.r, &["show", "198.51.100.0/24"]);
    assert_eq!(row[0]["algo"], "l4-hash");
    let v6 = t.r.ip_json(&[
        "-6",
        "route",
        "show",
        "table",
        "100",
        "exact",
        "2001:db8:99::/48",
    ]);
    assert_eq!(v6[0]["nexthops"].as_array().map(Vec::len), Some(2), "{v6}");
    let gone =
        t.r.ip_json(&["-4", "route", "show", "exact", "203.0.113.0/24"]);
    assert_eq!(gone, serde_json::json!([]));
    let after = routes(&t.r);

    // the second run and check mode after it: nothing to change
    let ((_, changed, failed), out) = site.play(PLAYBOOK, &t.r, &[]);
    assert_eq!((changed, failed), (0, 0), "not idempotent:\n{out}");
    let ((_, changed, failed), out) = site.play(PLAYBOOK, &t.r, &["--check", "--diff"]);
    assert_eq!((changed, failed), (0, 0), "{out}");
    assert_eq!(routes(&t.r), after);

    // another weight: one change, reported with before and after
    let edited = PLAYBOOK.replace("dev: vb, weight: 2", "dev: vb, weight: 3");
    let ((_, changed, _), out) = site.play(&edited, &t.r, &["--check", "--diff"]);
    assert_eq!(changed, 1, "{out}");
    assert!(
        out.contains("-      \"weight\": 2") && out.contains("+      \"weight\": 3"),
        "{out}"
    );
    assert_eq!(routes(&t.r), after);

    // a refusal fails the task with mproute's one line
    let bad = PLAYBOOK.replace("via: 10.2.0.2, dev: vb", "via: 10.99.0.2, dev: vb");
    let ((_, _, failed), out) = site.play(&bad, &t.r, &[]);
    assert_eq!(failed, 1, "{out}");
    assert!(
        out.contains("Nexthop has invalid gateway [ENETUNREACH]"),
        "{out}"
    );
    assert_eq!(routes(&t.r), after, "a refused task changed something");
}
