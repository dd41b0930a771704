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
