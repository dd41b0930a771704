//! Files and directories root writes where another user might have prepared a trap: a
//! directory is trusted only if nobody else could change it ([`untrusted`]), a file is opened
//! through its directory's descriptor, never through a symbolic link, never a FIFO or device,
//! mode 0600 ([`create_private`]).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{fcntl, openat, FcntlArg, OFlag};
use nix::sys::stat::{fchmod, fstat, Mode, SFlag};

/// Why a directory someone other than root could change must not be trusted, if it must not:
/// each existing directory from `top` down to `dir` must be a real directory (not a symbolic
/// link) owned by root (or by the caller), and writable by its owner only; above `top` a
/// directory writable by others must be sticky and root's (as `/sys/fs/bpf`, 1777, and `/tmp`
/// are), so that nobody else can rename what lies in it. Components not there yet are fine
/// (the caller creates them, mode 0700).
pub fn untrusted(top: &Path, dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    // a relative path is judged from the root down, as the kernel resolves it
    let (top, dir) = match (std::path::absolute(top), std::path::absolute(dir)) {
        (Ok(t), Ok(d)) => (t, d),
        _ => return Some(format!("{}: cannot make it absolute", dir.display())),
    };
    let (top, dir) = (top.as_path(), dir.as_path());
    let mut chain: Vec<&Path> = dir.ancestors().collect();
    chain.reverse();
    for p in chain {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            break;
        };
        let ours = p.starts_with(top);
        if m.file_type().is_symlink() {
            return Some(format!("{} is a symbolic link", p.display()));
        }
        if !m.is_dir() {
            return Some(format!("{} is not a directory", p.display()));
        }
        if m.uid() != 0 && m.uid() != me {
            return Some(format!(
                "{} belongs to uid {}, not root",
                p.display(),
                m.uid()
            ));
        }
        let others_write = m.mode() & 0o022 != 0;
        if others_write && (ours || m.mode() & 0o1000 == 0 || m.uid() != 0) {
            return Some(format!(
                "{} is writable by others (mode {:o})",
                p.display(),
                m.mode() & 0o7777
            ));
        }
    }
    None
}

/// The directory `path` opened for [`create_private`]: the last component must not be a
/// symbolic link, and what was opened must be root's (or the caller's) and writable by its
/// owner only (checked on the descriptor: a directory swapped in after [`untrusted`] looked
/// is refused).
pub fn open_dir(path: &Path) -> io::Result<File> {
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let dir = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let st = fstat(dir.as_raw_fd()).map_err(io::Error::from)?;
    if st.st_uid != 0 && st.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("belongs to uid {}, not root", st.st_uid),
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("is writable by others (mode {:o})", st.st_mode & 0o7777),
        ));
    }
    Ok(dir)
}

/// Create (or empty) the regular file `name` in `dir` for writing, mode 0600: a symbolic link
/// there is refused (`ELOOP`), so is anything but a regular file (a FIFO would block, a device
/// would be written), and an existing file loses what it held and any wider mode.
pub fn create_private(dir: &File, name: &str) -> io::Result<File> {
    let f = open_private(dir, name)?;
    f.set_len(0)?;
    Ok(f)
}

/// Open (or create) the regular file `name` in `dir` for writing as it is, mode 0600 and
/// root's (or the caller's): what [`create_private`] refuses is refused, and so is a file of
/// another user (a lock file anyone can open is a lock anyone can hold).
pub fn open_private(dir: &File, name: &str) -> io::Result<File> {
    if name.contains('/') || name == ".." || name == "." {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let fd = openat(
        Some(dir.as_raw_fd()),
        name,
        // read and write: a FIFO opens at once (and is then refused), not ENXIO or a block
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(io::Error::from)?;
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let f = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let st = fstat(f.as_raw_fd()).map_err(io::Error::from)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if st.st_uid != 0 && st.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("belongs to uid {}, not root", st.st_uid),
        ));
    }
    // a second name elsewhere (a hard link planted where hard links are not protected)
    if st.st_nlink > 1 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("has {} names (hard links)", st.st_nlink),
        ));
    }
    if st.st_mode & 0o077 != 0 {
        fchmod(f.as_raw_fd(), Mode::from_bits_truncate(0o600)).map_err(io::Error::from)?;
    }
    fcntl(f.as_raw_fd(), FcntlArg::F_SETFL(OFlag::empty())).map_err(io::Error::from)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::{create_private, open_dir};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn links_fifos_and_wide_modes_are_not_followed_or_kept() {
        let d = std::env::temp_dir().join(format!("mpt-sys-fs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).expect("dir");
        let victim = d.join("victim");
        std::fs::write(&victim, b"keep").expect("victim");
        std::os::unix::fs::symlink(&victim, d.join("link")).expect("symlink");
        nix::unistd::mkfifo(
            &d.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .expect("fifo");
        std::fs::write(d.join("old"), b"old data").expect("old");
        std::fs::set_permissions(d.join("old"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let dir = open_dir(&d).expect("open dir");
        let e = create_private(&dir, "link").expect_err("through a symlink");
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"keep");
        assert!(create_private(&dir, "fifo").is_err(), "a FIFO");
        assert!(create_private(&dir, "../x").is_err(), "a path");
        let f = create_private(&dir, "old").expect("an old file of ours");
        let md = f.metadata().expect("metadata");
        assert_eq!((md.len(), md.permissions().mode() & 0o7777), (0, 0o600));
        let f = create_private(&dir, "new").expect("a new file");
        assert_eq!(
            f.metadata().expect("md").permissions().mode() & 0o7777,
            0o600
        );
        assert!(
            open_dir(&d.join("link")).is_err(),
            "a symlink is not a directory to open"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
