//! Submissions in flight, by key (invariant 1's fast path within one engine).
//!
//! A submission of a key whose first submission this engine is writing (its statement
//! is on its way) waits for that one to end, then is judged as a replay of the job that
//! now holds the key. It does not take a place in the next submission statement only to
//! find the key taken. A repeat that comes while the first still waits for a statement
//! joins it there instead, which judges both in one statement.
//! The database's unique key still decides who creates the job: this only saves a
//! statement, and whatever goes wrong here sends the waiting submission down the
//! ordinary path.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// The keys whose first submission is being written, each with the submissions waiting
/// for it.
#[derive(Default)]
pub(crate) struct KeysInFlight {
    keys: Mutex<HashMap<(String, String), InFlight>>,
}

/// One key's first submission.
#[derive(Default)]
struct InFlight {
    /// Its statement is on its way: a repeat can no longer join it.
    writing: bool,
    /// The repeats waiting for it to end.
    waiting: Vec<oneshot::Sender<bool>>,
}

/// How a submission enters [`KeysInFlight`].
pub(crate) enum Entry<'a> {
    /// The first in flight for its key: it submits, and settles the guard when done.
    First(First<'a>),
    /// Another submission of the key is being written: `true` once a committed job holds
    /// the key, `false` (or a closed channel) when that is not known.
    Repeat(oneshot::Receiver<bool>),
    /// Another submission of the key waits for a statement: this one goes the ordinary
    /// way, to share it.
    Joined,
}

impl KeysInFlight {
    /// Enters a submission of `key` for `owner`; `None` if the registry is unusable
    /// (a poisoned lock), in which case the submission goes the ordinary way.
    pub(crate) fn enter(&self, owner: &str, key: &str) -> Option<Entry<'_>> {
        let mut keys = self.keys.lock().ok()?;
        let id = (owner.to_owned(), key.to_owned());
        match keys.get_mut(&id) {
            Some(first) if first.writing => {
                let (settle, settled) = oneshot::channel();
                first.waiting.push(settle);
                Some(Entry::Repeat(settled))
            }
            Some(_) => Some(Entry::Joined),
            None => {
                keys.insert(id.clone(), InFlight::default());
                Some(Entry::First(First {
                    keys: self,
                    id,
                    held: false,
                }))
            }
        }
    }

    /// Marks the first submissions of these keys as being written: later repeats wait for
    /// them instead of joining them.
    pub(crate) fn writing<'k>(&self, ids: impl IntoIterator<Item = (&'k str, &'k str)>) {
        if let Ok(mut keys) = self.keys.lock() {
            for (owner, key) in ids {
                if let Some(first) = keys.get_mut(&(owner.to_owned(), key.to_owned())) {
                    first.writing = true;
                }
            }
        }
    }
}

/// The first submission of a key in flight. Dropping it (settled or not, even when the
/// submission was cancelled midway) removes the key and answers every waiting
/// submission.
pub(crate) struct First<'a> {
    keys: &'a KeysInFlight,
    id: (String, String),
    held: bool,
}

impl First<'_> {
    /// Ends the first submission: `held` says that a committed job now holds the key.
    pub(crate) fn settle(mut self, held: bool) {
        self.held = held;
    }
}

impl Drop for First<'_> {
    fn drop(&mut self) {
        let waiting = match self.keys.keys.lock() {
            Ok(mut keys) => keys
                .remove(&self.id)
                .map(|first| first.waiting)
                .unwrap_or_default(),
            Err(_) => return,
        };
        for waiter in waiting {
            let _ = waiter.send(self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_repeat_learns_what_the_first_settled_and_the_key_is_free_again() {
        let keys = KeysInFlight::default();
        let Some(Entry::First(first)) = keys.enter("alice", "k") else {
            panic!("the first entry of a key must be First")
        };
        assert!(
            matches!(keys.enter("alice", "k"), Some(Entry::Joined)),
            "a repeat joins a first that waits for a statement"
        );
        keys.writing([("alice", "k")]);
        let Some(Entry::Repeat(repeat)) = keys.enter("alice", "k") else {
            panic!("a repeat must wait for a first being written")
        };
        // Another owner's key of the same name is unrelated.
        assert!(matches!(keys.enter("bob", "k"), Some(Entry::First(_))));
        first.settle(true);
        assert_eq!(repeat.await.ok(), Some(true));
        assert!(
            matches!(keys.enter("alice", "k"), Some(Entry::First(_))),
            "a settled key is no longer in flight"
        );
    }

    #[tokio::test]
    async fn a_first_dropped_unsettled_sends_its_repeats_the_ordinary_way() {
        let keys = KeysInFlight::default();
        let Some(Entry::First(first)) = keys.enter("alice", "k") else {
            panic!("first")
        };
        keys.writing([("alice", "k")]);
        let Some(Entry::Repeat(repeat)) = keys.enter("alice", "k") else {
            panic!("repeat")
        };
        drop(first);
        assert_eq!(repeat.await.ok(), Some(false));
        assert!(keys.keys.lock().map(|k| k.is_empty()).unwrap_or(false));
    }
}
