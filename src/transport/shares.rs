//! One bound's shape, wherever holders share something scarce: at most [`Shares::total`] in
//! all, and at most [`Shares::each`] for any one holder, well below the total, so that one
//! holder cannot keep the others out (decisions 0085 and 0087). A relay runner's sessions and
//! its agents, `hands serve --http`'s sessions and its clients, and the connections a token
//! vouches for on every listener (`conns.rs`) are all held to it.

/// The most held in all, and the most one holder may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    pub total: usize,
    pub each: usize,
}

/// Which bound one more would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// Every holder together holds [`Shares::total`].
    Total,
    /// This holder holds [`Shares::each`]; the others may still get theirs.
    Share,
}

impl Shares {
    /// Whether one more may be held, when `all` are held in all and `mine` of them by the one
    /// asking: `None` if it may, else the bound it would pass (the total first: then waiting is
    /// the remedy, not giving one back).
    pub fn over(&self, all: usize, mine: usize) -> Option<Over> {
        if all >= self.total {
            Some(Over::Total)
        } else if mine >= self.each {
            Some(Over::Share)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_checked_before_the_share() {
        let s = Shares { total: 4, each: 2 };
        assert_eq!(s.over(0, 0), None);
        assert_eq!(s.over(3, 1), None);
        assert_eq!(s.over(3, 2), Some(Over::Share));
        assert_eq!(s.over(4, 0), Some(Over::Total));
        assert_eq!(s.over(4, 2), Some(Over::Total));
    }
}
