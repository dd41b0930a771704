//! One invocation's hold on the namespace: the global options and the backend, opened on first
//! use (so that `--help` and syntax errors need neither root nor a socket). The lines of a
//! batch share one session, and so one backend and one lock. (What runs the lines is
//! [`crate::cmd`]'s.)

use mpt_cli::{Failure, GlobalOpts};

use crate::backend::Tables;
use crate::cli::BackendChoice;

/// The session.
#[derive(Debug)]
pub struct Session {
    /// Global options.
    pub opts: GlobalOpts,
    /// `--backend`.
    pub choice: BackendChoice,
    backend: Option<Box<dyn Tables>>,
}

impl Session {
    /// A session in the calling thread's namespace.
    pub fn new(opts: GlobalOpts, choice: BackendChoice) -> Session {
        Session {
            opts,
            choice,
            backend: None,
        }
    }

    /// The backend, opened on first use (with `--check`, the dry run over it).
    pub fn backend(&mut self) -> Result<&mut dyn Tables, Failure> {
        let (choice, check) = (self.choice, self.opts.check);
        let b = crate::backend::filled(&mut self.backend, || crate::backend::open(choice, check))?;
        Ok(b.as_mut())
    }

    /// The work left at the end of the invocation, where the backend was opened.
    pub fn finish(&mut self) -> Result<(), Failure> {
        match self.backend.as_mut() {
            Some(b) => b.finish(),
            None => Ok(()),
        }
    }

    /// Close the backend (and so release its lock).
    pub fn release(&mut self) {
        self.backend = None;
    }
}
