//! Locks taken even after an earlier holder panicked. The operator's shared data (the
//! store, the trigger, the certificate in use) is changed in steps that each leave it
//! whole, so a panic in one task leaves it usable; refusing it would stop every other task.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Reads `lock`, whether or not a writer panicked while holding it.
pub fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Writes `lock`, whether or not a writer panicked while holding it.
pub fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// Locks `mutex`, whether or not a holder panicked while holding it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, RwLock};

    /// After a holder panics, the data is read and written as it was left.
    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_taken() {
        let shared = Arc::new(RwLock::new(1));
        let mutex = Arc::new(Mutex::new(1));
        let (s, m) = (shared.clone(), mutex.clone());
        let _ = std::thread::spawn(move || {
            let _w = s.write().unwrap();
            let _g = m.lock().unwrap();
            panic!("a holder fails");
        })
        .join();
        assert!(shared.is_poisoned() && mutex.is_poisoned());
        *super::write(&shared) += 1;
        assert_eq!(*super::read(&shared), 2);
        *super::lock(&mutex) += 1;
        assert_eq!(*super::lock(&mutex), 2);
    }
}
