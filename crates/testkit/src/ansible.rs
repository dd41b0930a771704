//! Running the repository's Ansible collection (`ansible/`, `mpt.net`) with ansible-core: a
//! scratch directory where ansible finds the collection and keeps its own files, a playbook run
//! against localhost, and the play recap's counts.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::netns::Netns;

/// A scratch site: `collections/ansible_collections/mpt/net` linked to `ansible/`, and
/// ansible's home; removed on drop.
#[derive(Debug)]
pub struct Site {
    dir: PathBuf,
}

/// What a playbook run reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recap {
    /// Tasks that ran.
    pub ok: u64,
    /// Tasks that changed something.
    pub changed: u64,
    /// Tasks that failed.
    pub failed: u64,
}

impl Site {
    /// A site for the collection in `repo/ansible`.
    pub fn new(repo: &Path, tag: &str) -> Site {
        let dir = std::env::temp_dir().join(format!("mpt-ansible-{tag}-{}", std::process::id()));
        let coll = dir.join("collections/ansible_collections/mpt");
        std::fs::create_dir_all(&coll).expect("collections dir");
        let link = coll.join("net");
        if !link.exists() {
            let src = repo.join("ansible").canonicalize().expect("ansible/");
            std::os::unix::fs::symlink(src, &link).expect("link the collection");
        }
        Site { dir }
    }

    /// `ansible-playbook` of `playbook` on localhost with `-e ns=NS` and the `vars`, then
    /// `extra` options: the recap and the whole output.
    pub fn play(
        &self,
        playbook: &str,
        ns: &Netns,
        vars: &[(&str, &str)],
        extra: &[&str],
    ) -> (Recap, String) {
        let book = self.dir.join("site.yml");
        std::fs::write(&book, playbook).expect("write playbook");
        let home = self.dir.join("home");
        let mut cmd = Command::new("ansible-playbook");
        cmd.args(["-i", "localhost,", "-c", "local"])
            .args(["-e", "ansible_python_interpreter=/usr/bin/python3"])
            .args(["-e", &format!("ns={}", ns.name())]);
        for (k, v) in vars {
            cmd.args(["-e", &format!("{k}={v}")]);
        }
        let o = cmd
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
        (
            Recap {
                ok: count("ok"),
                changed: count("changed"),
                failed: count("failed"),
            },
            out,
        )
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
