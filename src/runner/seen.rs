//! Request ids remembered, per session of a runner's link, so that one sent again after a
//! reconnect is not run (or asked) twice: the newest few thousand, each by a SHA-256 of its
//! bytes. An id is whatever the other end sends, up to the size of a frame; kept whole, 4,096
//! ids of 4 MB grew a runner far past SPEC §13's 200 MB (found by session 41's attack pass,
//! through the real relay with an agent's own token).

use sha2::{Digest, Sha256};
use std::collections::{HashSet, VecDeque};

/// The newest `cap` ids seen, by digest, oldest first.
pub(crate) struct Seen {
    set: HashSet<[u8; 32]>,
    order: VecDeque<[u8; 32]>,
    cap: usize,
}

impl Seen {
    pub(crate) fn new(cap: usize) -> Seen {
        Seen { set: HashSet::new(), order: VecDeque::new(), cap }
    }

    /// Whether the id spelt `id` (its JSON text: `7` and `"7"` differ) is new; remembers it.
    pub(crate) fn first(&mut self, id: &[u8]) -> bool {
        let key: [u8; 32] = Sha256::digest(id).into();
        if !self.set.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > self.cap
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Seen;

    #[test]
    fn an_id_is_new_once_while_it_is_among_the_newest() {
        let mut s = Seen::new(2);
        assert!(s.first(b"1"));
        assert!(!s.first(b"1"));
        assert!(s.first(b"\"1\""), "a string id is not the number");
        assert!(s.first(b"3"));
        assert!(s.first(b"1"), "the oldest was forgotten");
        assert_eq!(s.order.len(), 2);
    }
}
