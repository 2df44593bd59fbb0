//! A panic in a request's work, noted with where it happened for that request's log line
//! instead of printed apart from its request id.

use std::cell::{Cell, RefCell};
use std::panic;
use std::sync::OnceLock;

thread_local! {
    /// Set while this thread answers a request ([`PlacementApi::guarded`]).
    static ANSWERING: Cell<bool> = const { Cell::new(false) };
    /// What panicked (where, and its message) while this thread answered a request.
    static NOTES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Notes panics on this thread while it answers a request.
pub(crate) struct Noting;

impl Noting {
    pub(crate) fn start() -> Noting {
        NOTES.with(|n| n.borrow_mut().clear());
        ANSWERING.with(|a| a.set(true));
        Noting
    }

    /// What panicked since [`Noting::start`].
    pub(crate) fn take() -> Vec<String> {
        NOTES.with(|n| std::mem::take(&mut *n.borrow_mut()))
    }
}

impl Drop for Noting {
    fn drop(&mut self) {
        ANSWERING.with(|a| a.set(false));
    }
}

/// Installs, once per process, a panic hook that keeps a panic on a thread answering a
/// Placement request (with where it happened) for that request's log line, instead of
/// printing it apart from the request id; every other panic goes to the hook there was.
pub(crate) fn note_panics_of_requests() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if ANSWERING.with(Cell::get) {
                let note = info.to_string();
                NOTES.with(|n| n.borrow_mut().push(note));
            } else {
                previous(info);
            }
        }));
    });
}

/// A panic's message, from its payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}

/// The start of a body, for a log line.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    const SHOWN: usize = 4096;
    let shown = body.get(..SHOWN).unwrap_or(body);
    let mut text = String::from_utf8_lossy(shown).into_owned();
    if body.len() > SHOWN {
        text.push('…');
    }
    text
}
