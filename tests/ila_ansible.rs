//! The Ansible collection's `mpt.net.ila_xlat` run for real with ansible-core against a
//! throwaway namespace: check mode, twice for real, check mode again. Oracles: the play recap
//! and `ila -j xlat show`.

use mpt_testkit::ansible::Site;
use mpt_testkit::{require_root, Netns, Tool};

const ILA_BIN: &str = env!("CARGO_BIN_EXE_ila");
const ILA: Tool = Tool::new(ILA_BIN);

const PLAYBOOK: &str = r#"
- hosts: localhost
  gather_facts: false
  tasks:
    - name: ILA addresses of locator 2001:db8:ff:1 become SIR addresses
      mpt.net.ila_xlat:
        ila: "{{ ila }}"
        netns: "{{ ns }}"
        loc_match: "2001:db8:ff:1"
        loc: "2001:db8:1:2"
        csum_mode: neutral-map
    - name: no mapping for 2001:db8:ff:9
      mpt.net.ila_xlat:
        ila: "{{ ila }}"
        netns: "{{ ns }}"
        loc_match: "2001:db8:ff:9"
        state: absent
"#;

#[test]
fn an_ila_playbook_changes_once_then_nothing() {
    require_root();
    let ns = Netns::new("ila-ansbl");
    ILA.ok(
        &ns,
        &[
            "xlat",
            "add",
            "loc_match",
            "2001:db8:ff:9",
            "loc",
            "2001:db8:1:9",
        ],
    );
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let site = Site::new(&repo, "ila");
    let vars = [("ila", ILA_BIN)];
    let before = ILA.json(&ns, &["xlat", "show"]);
    let (rc, out) = site.play(PLAYBOOK, &ns, &vars, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (2, 0), "{out}");
    assert!(out.contains("+  \"csum_mode\": \"neutral-map\""), "{out}");
    assert_eq!(
        ILA.json(&ns, &["xlat", "show"]),
        before,
        "check mode changed something"
    );
    let (rc, out) = site.play(PLAYBOOK, &ns, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (2, 0), "{out}");
    let now = ILA.json(&ns, &["xlat", "show"]);
    let rows = now.as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{now}");
    assert_eq!(rows[0]["locator_match"], "2001:db8:ff:1");
    assert_eq!(rows[0]["locator"], "2001:db8:1:2");
    assert_eq!(rows[0]["csum_mode"], "neutral-map");
    let (rc, out) = site.play(PLAYBOOK, &ns, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "not idempotent:\n{out}");
    let (rc, out) = site.play(PLAYBOOK, &ns, &vars, &["--check"]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "{out}");
    assert_eq!(ILA.json(&ns, &["xlat", "show"]), now);
}

const ROUTES: &str = r#"
- hosts: localhost
  gather_facts: false
  tasks:
    - name: SIR addresses of 2001:db8:100::/64 leave with locator 2001:db8:ff:1
      mpt.net.ila_route:
        ila: "{{ ila }}"
        netns: "{{ ns }}"
        prefix: 2001:db8:100::/64
        loc: "{{ loc }}"
        ident_type: luid
        csum_mode: neutral-map
        via: 2001:db8:1::2
        dev: x0
    - name: no ILA route to 2001:db8:200::/64
      mpt.net.ila_route:
        ila: "{{ ila }}"
        netns: "{{ ns }}"
        prefix: 2001:db8:200::/64
        state: absent
"#;

#[test]
fn an_ila_route_playbook_changes_once_then_nothing() {
    require_root();
    let ns = Netns::new("ilart-ansbl");
    ns.ip_ok(&["link", "add", "x0", "type", "veth", "peer", "name", "x1"]);
    ns.ip_ok(&["link", "set", "x0", "up"]);
    ns.ip_ok(&["link", "set", "x1", "up"]);
    ns.ip_ok(&["addr", "add", "2001:db8:1::1/64", "dev", "x0", "nodad"]);
    ILA.ok(
        &ns,
        &[
            "route",
            "add",
            "2001:db8:200::/64",
            "loc",
            "2001:db8:ff:9",
            "ident-type",
            "luid",
            "via",
            "2001:db8:1::2",
            "dev",
            "x0",
        ],
    );
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let site = Site::new(&repo, "ila-route");
    let vars = [("ila", ILA_BIN), ("loc", "2001:db8:ff:1")];
    let fib = || ns.ip_json(&["-6", "route", "show", "proto", "ila"]);
    let before = (ILA.json(&ns, &["route", "show"]), fib());
    let (rc, out) = site.play(ROUTES, &ns, &vars, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (2, 0), "{out}");
    assert!(out.contains("+    \"locator\": \"2001:db8:ff:1\""), "{out}");
    assert!(out.contains("-    \"locator\": \"2001:db8:ff:9\""), "{out}");
    assert_eq!(
        (ILA.json(&ns, &["route", "show"]), fib()),
        before,
        "check mode changed something"
    );

    let (rc, out) = site.play(ROUTES, &ns, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (2, 0), "{out}");
    let now = ILA.json(&ns, &["route", "show"]);
    let rows = now.as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{now}");
    assert_eq!(rows[0]["dst"], "2001:db8:100::/64");
    assert_eq!(rows[0]["encap"]["locator"], "2001:db8:ff:1");
    assert_eq!(rows[0]["encap"]["csum_mode"], "neutral-map");
    assert_eq!(rows[0]["encap"]["ident_type"], "luid");
    // the kernel's word: one route of ila's, to the SIR prefix, by the gateway
    let kernel = fib();
    let dsts: Vec<(&str, &str, &str)> = kernel
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["dst"].as_str().unwrap_or(""),
                r["gateway"].as_str().unwrap_or(""),
                r["dev"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        dsts,
        [("2001:db8:100::/64", "2001:db8:1::2", "x0")],
        "{kernel}"
    );

    let after = (now, kernel);
    let (rc, out) = site.play(ROUTES, &ns, &vars, &[]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "not idempotent:\n{out}");
    let (rc, out) = site.play(ROUTES, &ns, &vars, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (0, 0), "{out}");
    assert_eq!((ILA.json(&ns, &["route", "show"]), fib()), after);

    // another locator: one change, before and after in the diff
    let other = [("ila", ILA_BIN), ("loc", "2001:db8:ff:2")];
    let (rc, out) = site.play(ROUTES, &ns, &other, &["--check", "--diff"]);
    assert_eq!((rc.changed, rc.failed), (1, 0), "{out}");
    assert!(
        out.contains("-    \"locator\": \"2001:db8:ff:1\"")
            && out.contains("+    \"locator\": \"2001:db8:ff:2\""),
        "{out}"
    );
    assert_eq!((ILA.json(&ns, &["route", "show"]), fib()), after);
}
