//! How many Events the webhook may publish. Each denial is reported as a Warning Event on the
//! object, whose text comes from the reviewed object; a client that repeats reviews (kubectl
//! retrying, or anyone who can reach the webhook) must not make the operator write Events
//! without end. At most [`PER_OBJECT`] Events per object and [`TOTAL`] in all are published in
//! any [`WINDOW`]; denials past that are still answered, without an Event.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The span the bounds count over.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Events about one object per [`WINDOW`].
pub const PER_OBJECT: usize = 3;
/// Events in all per [`WINDOW`].
pub const TOTAL: usize = 60;

/// An object an Event is about: kind, namespace (empty when cluster-scoped) and name.
pub type ObjectKey = (String, String, String);

/// The Events published within the last [`WINDOW`]: never more than [`TOTAL`] are kept.
#[derive(Debug, Default)]
pub struct EventBudget {
    sent: VecDeque<(Instant, ObjectKey)>,
}

impl EventBudget {
    /// Whether an Event about `object` may be published at `now`; if so it is counted.
    pub fn allow(&mut self, object: &ObjectKey, now: Instant) -> bool {
        while self
            .sent
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= WINDOW)
        {
            self.sent.pop_front();
        }
        if self.sent.len() >= TOTAL {
            return false;
        }
        if self.sent.iter().filter(|(_, o)| o == object).count() >= PER_OBJECT {
            return false;
        }
        self.sent.push_back((now, object.clone()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flavor(name: &str) -> ObjectKey {
        ("Flavor".into(), String::new(), name.into())
    }

    #[test]
    fn one_object_gets_a_few_events_a_minute() {
        let mut budget = EventBudget::default();
        let t0 = Instant::now();
        let allowed = (0..10)
            .filter(|i| budget.allow(&flavor("m1"), t0 + Duration::from_secs(*i)))
            .count();
        assert_eq!(allowed, PER_OBJECT);
        // Another object is not held back by the first.
        assert!(budget.allow(&flavor("m2"), t0 + Duration::from_secs(10)));
        // The same name in a namespace is another object.
        let server = ("Server".to_string(), "shop".to_string(), "m1".to_string());
        assert!(budget.allow(&server, t0 + Duration::from_secs(10)));
        // A minute after the first, one more.
        assert!(budget.allow(&flavor("m1"), t0 + WINDOW));
        assert!(!budget.allow(&flavor("m1"), t0 + WINDOW));
    }

    #[test]
    fn all_objects_together_get_a_bounded_number_a_minute() {
        let mut budget = EventBudget::default();
        let t0 = Instant::now();
        let allowed = (0..TOTAL * 3)
            .filter(|i| budget.allow(&flavor(&format!("f{i}")), t0))
            .count();
        assert_eq!(allowed, TOTAL);
        assert!(budget.sent.len() <= TOTAL);
        assert!(budget.allow(&flavor("late"), t0 + WINDOW));
    }
}
