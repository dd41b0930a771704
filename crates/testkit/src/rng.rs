//! The one pseudo-random generator of tests and benchmarks: xorshift64 (Marsaglia), seeded
//! explicitly so that a failure can be replayed.

/// xorshift64: deterministic, no dependency. The seed must not be 0.
#[derive(Debug, Clone)]
pub struct XorShift64(pub u64);

impl XorShift64 {
    /// The next 64 bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A value below `n` (not exactly uniform; good enough for test data).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Fill `buf` with pseudo-random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::XorShift64;

    #[test]
    fn known_sequence() {
        // Marsaglia's xorshift64 (13, 7, 17) from seed 1.
        let mut r = XorShift64(1);
        assert_eq!(r.next(), 1_082_269_761);
        assert_ne!(r.next(), r.next());
    }
}
