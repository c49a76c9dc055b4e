//! Rate limits: a token bucket, and buckets kept per network address.
//!
//! A class's students often share one address (a school's network behind one router), so the
//! address limits leave room for a whole class: they stop one machine from doing what a class
//! never does (sixty joins a minute, twenty unknown class codes in a row), not a class.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A token bucket: `burst` at once, then one every `every`.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    pub burst: u32,
    pub every: Duration,
}

impl Rate {
    /// `per_minute` at once and per minute.
    pub fn per_minute(per_minute: u32) -> Rate {
        Rate { burst: per_minute, every: Duration::from_secs(60) / per_minute.max(1) }
    }
}

/// One bucket's tokens and when they were last counted.
#[derive(Clone, Copy, Debug)]
pub struct Bucket {
    tokens: f64,
    counted: Instant,
}

impl Bucket {
    pub fn full(rate: Rate, now: Instant) -> Bucket {
        Bucket { tokens: f64::from(rate.burst), counted: now }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let every = rate.every.as_secs_f64().max(1e-9);
        let gained = now.saturating_duration_since(self.counted).as_secs_f64() / every;
        self.tokens = (self.tokens + gained).min(f64::from(rate.burst));
        self.counted = now;
    }

    /// Takes a token if there is one.
    pub fn take(&mut self, rate: Rate, now: Instant) -> bool {
        self.refill(rate, now);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    /// Whether a token is left, without taking it.
    pub fn has(&mut self, rate: Rate, now: Instant) -> bool {
        self.refill(rate, now);
        self.tokens >= 1.0
    }

    fn is_full(&mut self, rate: Rate, now: Instant) -> bool {
        self.refill(rate, now);
        self.tokens >= f64::from(rate.burst)
    }
}

/// What an address is known by: an IPv4 address, or an IPv6 address's /64 network (one
/// machine commonly holds a whole /64, and would otherwise have 2⁶⁴ fresh buckets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressKey {
    V4(u32),
    V6(u64),
}

impl From<IpAddr> for AddressKey {
    fn from(ip: IpAddr) -> AddressKey {
        match ip.to_canonical() {
            IpAddr::V4(v4) => AddressKey::V4(u32::from(v4)),
            IpAddr::V6(v6) => AddressKey::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

/// One bucket per address, at one rate. The map stays small: buckets that have filled up again
/// are forgotten (a full bucket is the same as none), and past [`PerAddress::MOST`] addresses a
/// new one is refused until some fill up (many addresses at once is an attack, not a class).
#[derive(Debug)]
pub struct PerAddress {
    rate: Rate,
    buckets: HashMap<AddressKey, Bucket>,
    /// The size at which full buckets are next looked for (it doubles, so that the search costs
    /// a constant per new address), and when they last were (at the most, once per
    /// [`PerAddress::PRUNE_EVERY`]).
    next_prune: usize,
    pruned_at: Option<Instant>,
}

impl PerAddress {
    pub const MOST: usize = 100_000;
    const PRUNE_EVERY: Duration = Duration::from_millis(100);

    pub fn new(rate: Rate) -> PerAddress {
        PerAddress { rate, buckets: HashMap::new(), next_prune: Self::MOST / 10, pruned_at: None }
    }

    fn bucket(&mut self, ip: IpAddr, now: Instant) -> Option<&mut Bucket> {
        let key = AddressKey::from(ip);
        if !self.buckets.contains_key(&key) {
            let len = self.buckets.len();
            let may_prune = len < Self::MOST
                || self.pruned_at.is_none_or(|t| now.saturating_duration_since(t) >= Self::PRUNE_EVERY);
            if len >= self.next_prune && may_prune {
                let rate = self.rate;
                self.buckets.retain(|_, b| !b.is_full(rate, now));
                self.pruned_at = Some(now);
                self.next_prune = (2 * self.buckets.len()).clamp(Self::MOST / 10, Self::MOST);
            }
            if self.buckets.len() >= Self::MOST {
                return None;
            }
        }
        let rate = self.rate;
        Some(self.buckets.entry(key).or_insert_with(|| Bucket::full(rate, now)))
    }

    /// Takes one of the address's tokens; `false` when it has none.
    pub fn take(&mut self, ip: IpAddr, now: Instant) -> bool {
        let rate = self.rate;
        self.bucket(ip, now).is_some_and(|b| b.take(rate, now))
    }

    /// Whether the address has a token left (none is taken).
    pub fn allows(&mut self, ip: IpAddr, now: Instant) -> bool {
        let rate = self.rate;
        let key = AddressKey::from(ip);
        match self.buckets.get_mut(&key) {
            Some(b) => b.has(rate, now),
            None => self.buckets.len() < Self::MOST,
        }
    }

    /// Addresses with a bucket (for tests).
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn a_bucket_gives_its_burst_then_one_per_period() {
        let rate = Rate { burst: 3, every: Duration::from_secs(1) };
        let t0 = Instant::now();
        let mut b = Bucket::full(rate, t0);
        assert!((0..3).all(|_| b.take(rate, t0)));
        assert!(!b.take(rate, t0));
        assert!(!b.take(rate, t0 + Duration::from_millis(900)));
        assert!(b.take(rate, t0 + Duration::from_millis(1000)));
        assert!(!b.has(rate, t0 + Duration::from_millis(1100)));
        // It never holds more than its burst.
        let later = t0 + Duration::from_secs(3600);
        assert!((0..3).all(|_| b.take(rate, later)) && !b.take(rate, later));
    }

    #[test]
    fn addresses_have_their_own_buckets_and_ipv6_counts_by_network() {
        let mut joins = PerAddress::new(Rate::per_minute(60));
        let t0 = Instant::now();
        let attacker = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let student = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
        assert_eq!((0..100).filter(|_| joins.take(attacker, t0)).count(), 60);
        assert!(!joins.allows(attacker, t0));
        assert!(joins.allows(student, t0) && joins.take(student, t0));
        // One a second comes back.
        assert!(joins.take(attacker, t0 + Duration::from_secs(1)));
        // Two addresses of one /64 share a bucket; the next /64 does not.
        let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 1));
        let b = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0xffff, 1, 2, 3));
        let c = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1));
        assert_eq!((0..40).filter(|_| joins.take(a, t0)).count(), 40);
        assert_eq!((0..40).filter(|_| joins.take(b, t0)).count(), 20);
        assert!(joins.take(c, t0));
        // An IPv4 address seen as IPv6 is the same address.
        let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 2).to_ipv6_mapped());
        assert_eq!(AddressKey::from(mapped), AddressKey::from(attacker));
    }

    #[test]
    fn full_buckets_are_forgotten_and_the_map_is_bounded() {
        let rate = Rate { burst: 2, every: Duration::from_millis(10) };
        let mut misses = PerAddress::new(rate);
        let t0 = Instant::now();
        for i in 0..(PerAddress::MOST as u32 + 50) {
            misses.take(IpAddr::V4(Ipv4Addr::from(i)), t0);
        }
        assert_eq!(misses.len(), PerAddress::MOST, "no more than the most");
        assert!(!misses.take(IpAddr::V4(Ipv4Addr::from(u32::MAX)), t0), "a new address past the most is refused");
        // Once they fill up again they are forgotten, and new addresses are served.
        let later = t0 + Duration::from_secs(1);
        assert!(misses.take(IpAddr::V4(Ipv4Addr::from(u32::MAX)), later));
        assert_eq!(misses.len(), 1);
    }
}
