//! The Ansible collection (`ansible/`, `mpt.net`) run for real: a playbook of `mproute_route`
//! tasks against a throwaway namespace with Debian's ansible-core, in check mode, then twice for
//! real, then in check mode again. Oracles: the play recap's counts and `ip -j route`.

use mpt_testkit::ansible::Site;
use mpt_testkit::{require_root, Netns, Tool, TwoPaths};
use serde_json::Value;

const MPROUTE: &str = env!("CARGO_BIN_EXE_mproute");
const MP: Tool = Tool::new(MPROUTE);

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
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let site = Site::new(&repo, "mproute");
    let vars = [("mproute", MPROUTE)];
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
    let (rc, out) = site.play(PLAYBOOK, &t.r, &vars, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (3, 0), "{out}");
    assert!(
        out.contains("+  \"algo\": \"l4-hash\""),
        "the diff shows the route after:\n{out}"
    );
    assert_eq!(routes(&t.r), before, "check mode changed something:\n{out}");

    // the first run changes all three, as the kernel then says
    let (rc, out) = site.play(PLAYBOOK, &t.r, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (3, 0), "{out}");
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
    let (rc, out) = site.play(PLAYBOOK, &t.r, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "not idempotent:\n{out}");
    let (rc, out) = site.play(PLAYBOOK, &t.r, &vars, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "{out}");
    assert_eq!(routes(&t.r), after);

    // another weight: one change, reported with before and after
    let edited = PLAYBOOK.replace("dev: vb, weight: 2", "dev: vb, weight: 3");
    let (rc, out) = site.play(&edited, &t.r, &vars, &["--check", "--diff"]);
    assert_eq!(rc.changed, 1, "{out}");
    assert!(
        out.contains("-      \"weight\": 2") && out.contains("+      \"weight\": 3"),
        "{out}"
    );
    assert_eq!(routes(&t.r), after);

    // a refusal fails the task with mproute's one line
    let bad = PLAYBOOK.replace("via: 10.2.0.2, dev: vb", "via: 10.99.0.2, dev: vb");
    let (rc, out) = site.play(&bad, &t.r, &vars, &[]);
    assert_eq!(rc.failed, 1, "{out}");
    assert!(
        out.contains("Nexthop has invalid gateway [ENETUNREACH]"),
        "{out}"
    );
    assert_eq!(routes(&t.r), after, "a refused task changed something");
}

const DATAPLANE: &str = r#"
- hosts: localhost
  gather_facts: false
  tasks:
    - name: the dataplane on both paths, tc
      mpt.net.mproute_dataplane:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        devs: [va, vb]
        mode: tc
        peer: "{{ peer }}"
    - name: no dataplane on vc
      mpt.net.mproute_dataplane:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        dev: vc
        state: absent
    - name: flows keep their path when one comes or goes
      mpt.net.mproute_route:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        dst: 198.51.100.0/24
        algo: l4-hash
        resilient: true
        buckets: "{{ buckets }}"
        idle_timer: 30
        nexthops:
          - {via: 10.1.0.2, dev: va}
          - {via: 10.2.0.2, dev: vb}
"#;

/// Each attached device's (mode, peer devices), as `mproute -j dataplane show` says.
fn attachments(t: &TwoPaths) -> Vec<(String, String, Vec<String>)> {
    let shown = MP.json(&t.r, &["dataplane", "show"]);
    let mut v: Vec<(String, String, Vec<String>)> = shown["attachments"]
        .as_array()
        .expect("attachments")
        .iter()
        .map(|a| {
            let mut peers: Vec<String> = a["peer_devs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect();
            peers.sort();
            (
                a["dev"].as_str().unwrap_or("").to_string(),
                a["mode"].as_str().unwrap_or("").to_string(),
                peers,
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_playbook_attaches_the_dataplane_and_makes_a_route_resilient() {
    require_root();
    let t = TwoPaths::new("ansdp");
    if mpt_testkit::matrix::dataplane_refused_here(&MP) {
        return;
    }
    // a third device with the dataplane on it, which the play takes off
    t.r.ip_ok(&["link", "add", "vc", "type", "veth", "peer", "name", "vc1"]);
    t.r.ip_ok(&["link", "set", "vc", "up"]);
    MP.ok(&t.r, &["dataplane", "attach", "dev", "vc", "tc"]);
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let site = Site::new(&repo, "mproute-dp");
    let on = [("mproute", MPROUTE), ("peer", "true"), ("buckets", "64")];
    let vc_only = attachments(&t);
    assert_eq!(vc_only.len(), 1, "{vc_only:?}");
    let before = routes(&t.r);

    // check mode with diff: all three would change, nothing does
    let (rc, out) = site.play(DATAPLANE, &t.r, &on, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (3, 0), "{out}");
    assert!(out.contains("+  \"resilient\": {"), "{out}");
    assert!(
        out.contains("-    \"vc\": [\n-      \"tc\"\n-    ]"),
        "{out}"
    );
    assert_eq!(attachments(&t), vc_only, "check mode attached:\n{out}");
    assert_eq!(routes(&t.r), before, "check mode changed a route:\n{out}");

    // for real: tc on va and vb, delivering into both veths' peers (vc's is in this namespace)
    let (rc, out) = site.play(DATAPLANE, &t.r, &on, &[]);
    assert_eq!((rc.changed, rc.failed), (3, 0), "{out}");
    let both = vec!["va".to_string(), "vb".to_string()];
    assert_eq!(
        attachments(&t),
        [
            ("va".into(), "tc".into(), both.clone()),
            ("vb".into(), "tc".into(), both.clone())
        ]
    );
    let row = MP.json(&t.r, &["show", "198.51.100.0/24"]);
    assert_eq!(row[0]["algo"], "l4-hash", "{row}");
    assert_eq!(
        row[0]["resilient"],
        serde_json::json!({"buckets": 64, "idle_timer": 30})
    );
    assert_eq!(row[0]["enforced_by"], "tc", "{row}");
    let v4 =
        t.r.ip_json(&["-4", "route", "show", "exact", "198.51.100.0/24"]);
    assert_eq!(v4[0]["nexthops"].as_array().map(Vec::len), Some(2), "{v4}");
    assert_eq!(v4[0]["protocol"], "mproute");
    let after = (attachments(&t), routes(&t.r));

    // again, and in check mode: nothing to change
    let (rc, out) = site.play(DATAPLANE, &t.r, &on, &[]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "not idempotent:\n{out}");
    let (rc, out) = site.play(DATAPLANE, &t.r, &on, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "{out}");
    assert_eq!((attachments(&t), routes(&t.r)), after);

    // peer off and another table size: what --check alone would not see (same hooks) is seen
    let off = [("mproute", MPROUTE), ("peer", "false"), ("buckets", "32")];
    let (rc, out) = site.play(DATAPLANE, &t.r, &off, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (2, 0), "{out}");
    assert!(
        out.contains("-    \"buckets\": 64") && out.contains("+    \"buckets\": 32"),
        "{out}"
    );
    assert!(out.contains("+    \"va\": [],"), "{out}");
    assert_eq!((attachments(&t), routes(&t.r)), after);
    let (rc, out) = site.play(DATAPLANE, &t.r, &off, &[]);
    assert_eq!((rc.changed, rc.failed), (2, 0), "{out}");
    assert_eq!(
        attachments(&t),
        [
            ("va".into(), "tc".into(), vec![]),
            ("vb".into(), "tc".into(), vec![])
        ]
    );
    let row = MP.json(&t.r, &["show", "198.51.100.0/24"]);
    assert_eq!(row[0]["resilient"]["buckets"], 32, "{row}");
    let (rc, out) = site.play(DATAPLANE, &t.r, &off, &[]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "not idempotent:\n{out}");

    // a device that is not there fails the task with mproute's one line, and changes nothing
    let now = (attachments(&t), routes(&t.r));
    let bad = DATAPLANE.replace("devs: [va, vb]", "devs: [va, nosuch0]");
    let (rc, out) = site.play(&bad, &t.r, &off, &[]);
    assert_eq!(rc.failed, 1, "{out}");
    assert!(out.contains("cannot find device \\\"nosuch0\\\""), "{out}");
    assert_eq!((attachments(&t), routes(&t.r)), now);
}

const CONSISTENT: &str = r#"
- hosts: localhost
  gather_facts: false
  tasks:
    - name: the same table on every router, one hash recipe
      mpt.net.mproute_route:
        mproute: "{{ mproute }}"
        netns: "{{ ns }}"
        dst: 198.51.100.0/24
        algo: l4-hash
        consistent: true
        table_size: 251
        seed: "{{ seed }}"
        hash_fields: [ip-proto, src-port, dst-port]
        nexthops:
          - {via: 10.1.0.2, dev: va}
          - {via: 10.2.0.2, dev: vb}
      register: r
    - name: what the change moved
      debug:
        msg: "moved={{ r.moved | default('none') }}"
"#;

/// `mproute_route` with `consistent`, `table_size`, `hash_fields` and `seed`: written once,
/// then nothing to change; another seed is a change, and the task returns the share of the
/// flows it moves (`--check`'s `moved`).
#[test]
fn a_playbook_writes_a_consistent_route_with_a_hash_recipe() {
    require_root();
    let t = TwoPaths::new("anscs");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let site = Site::new(&repo, "mproute-cs");
    let vars = [("mproute", MPROUTE), ("seed", "7")];
    let (rc, out) = site.play(CONSISTENT, &t.r, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (1, 0), "{out}");
    assert!(
        out.contains("moved=none"),
        "a new route moves nothing it had: {out}"
    );
    let row = MP.json(&t.r, &["-d", "show", "198.51.100.0/24"]);
    assert_eq!(row[0]["consistent"]["table_size"], 251, "{row}");
    assert_eq!(
        row[0]["consistent"]["table"].as_array().map(Vec::len),
        Some(251)
    );
    assert_eq!(row[0]["seed"], 7, "{row}");
    assert_eq!(
        row[0]["hash_fields"],
        serde_json::json!(["ip-proto", "src-port", "dst-port"])
    );
    let (rc, out) = site.play(CONSISTENT, &t.r, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "not idempotent:\n{out}");
    // another seed: every flow rehashed, about half of them land elsewhere (two nexthops)
    let other = [("mproute", MPROUTE), ("seed", "8")];
    let (rc, out) = site.play(CONSISTENT, &t.r, &other, &[]);
    assert_eq!((rc.changed, rc.failed), (1, 0), "{out}");
    let moved: f64 = out
        .split("moved=")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no moved figure: {out}"));
    assert!((moved - 0.5).abs() < 0.01, "{moved}: {out}");
}
