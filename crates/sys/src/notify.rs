//! systemd's readiness protocol (`sd_notify(3)`): one datagram of `KEY=VALUE` lines to the
//! `AF_UNIX` socket named by `$NOTIFY_SOCKET`, which systemd sets for a `Type=notify` service.
//! Outside such a service the variable is unset and every call does nothing: the tools work
//! the same from a shell. No library: the protocol is a single `sendto(2)`.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Send `state` (`READY=1`, `STOPPING=1`, `STATUS=...`, newline-separated) to the service
/// manager. `Ok(false)`: no manager asked for it (`$NOTIFY_SOCKET` unset or empty).
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    if path.is_empty() {
        return Ok(false);
    }
    send_to(&path, state)?;
    Ok(true)
}

/// Held by the caller while it must not be stopped (a round of work that writes state): a
/// SIGTERM or SIGINT waits for it, see [`stop_on_signals`].
#[derive(Debug, Clone, Default)]
pub struct Busy(std::sync::Arc<std::sync::Mutex<()>>);

impl Busy {
    /// Hold off the stop until the guard is dropped.
    pub fn hold(&self) -> std::sync::MutexGuard<'_, ()> {
        // a poisoned lock only means a panic elsewhere: it still orders the stop
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// From now on SIGTERM and SIGINT end the process through a thread of their own, which waits
/// until no [`Busy::hold`] guard is held (a round in progress finishes), tells the service
/// manager `STOPPING=1` and exits 0 (the stop systemd asked for is not a failure). Call it
/// before the process starts other threads: the signals are blocked in the calling thread and
/// in those it starts later, and only that thread receives them.
pub fn stop_on_signals() -> io::Result<Busy> {
    let busy = Busy::default();
    let held = busy.clone();
    // SAFETY: sigemptyset/sigaddset on a local set; pthread_sigmask with valid pointers.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        set
    };
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: sigwait with the set blocked above and a live out-pointer.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            let _guard = held.hold();
            let _ = notify("STOPPING=1");
            std::process::exit(0);
        })?;
    Ok(busy)
}

/// Send `state` to the datagram socket at `path` (`@name`: the abstract namespace, as systemd
/// writes it).
fn send_to(path: &std::ffi::OsStr, state: &str) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else if bytes.first() == Some(&b'/') {
        sock.send_to(state.as_bytes(), path)?;
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NOTIFY_SOCKET is neither an absolute path nor an abstract name (@...)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_socket_receives_the_state() {
        let dir = std::env::temp_dir().join(format!("mpt-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).expect("bind");
        send_to(path.as_os_str(), "READY=1\nSTATUS=first pass done").expect("send");
        let mut buf = [0u8; 128];
        let n = rx.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=first pass done");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_abstract_socket_receives_the_state() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("mpt-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .expect("abstract name");
        let rx = UnixDatagram::bind_addr(&addr).expect("bind");
        send_to(std::ffi::OsStr::new(&format!("@{name}")), "STOPPING=1").expect("send");
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn a_relative_path_is_refused() {
        let e = send_to(std::ffi::OsStr::new("notify"), "READY=1").expect_err("relative");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
