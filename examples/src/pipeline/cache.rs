//! A direct-mapped, write-through, write-allocate data cache: only tags are kept (the data lives in
//! the memory array), because what the pipeline needs from it is hit or miss.

/// Cache geometry and timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Number of lines (at least 1).
    pub lines: u32,
    /// Bytes per line (at least 4).
    pub line_bytes: u32,
    /// Extra cycles a miss keeps the MEM stage busy (the refill).
    pub miss_penalty: u64,
}

impl Default for CacheConfig {
    /// 4 lines of 16 bytes (64 bytes), 8-cycle refill: small enough that the example programs miss.
    fn default() -> Self {
        CacheConfig { lines: 4, line_bytes: 16, miss_penalty: 8 }
    }
}

/// The outcome of an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The line was present.
    Hit,
    /// The line was refilled; `evicted` is the address of the line it replaced, if any.
    Miss {
        /// Line set index.
        set: u32,
        /// Base address of the evicted line.
        evicted: Option<u32>,
    },
}

/// The tag array.
#[derive(Clone, Debug)]
pub struct Cache {
    config: CacheConfig,
    tags: Vec<Option<u32>>,
    /// Hits so far.
    pub hits: u64,
    /// Misses so far.
    pub misses: u64,
}

impl Cache {
    /// An empty (cold) cache. A geometry below the minimum is raised to it (1 line, 4 bytes).
    pub fn new(mut config: CacheConfig) -> Cache {
        config.lines = config.lines.max(1);
        config.line_bytes = config.line_bytes.max(4);
        Cache { config, tags: vec![None; config.lines as usize], hits: 0, misses: 0 }
    }

    /// The configuration.
    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// Looks up `addr`, refilling its line on a miss (stores allocate too).
    pub fn access(&mut self, addr: u32) -> Access {
        let line = addr / self.config.line_bytes;
        let set = line % self.config.lines;
        let tag = line / self.config.lines;
        let slot = &mut self.tags[set as usize];
        if *slot == Some(tag) {
            self.hits += 1;
            return Access::Hit;
        }
        let evicted = slot.map(|t| (t * self.config.lines + set) * self.config.line_bytes);
        *slot = Some(tag);
        self.misses += 1;
        Access::Miss { set, evicted }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_within_a_line_misses_on_conflict() {
        let mut c = Cache::new(CacheConfig::default());
        assert_eq!(c.access(0x1000), Access::Miss { set: 0, evicted: None });
        assert_eq!(c.access(0x100c), Access::Hit);
        assert_eq!(c.access(0x1010), Access::Miss { set: 1, evicted: None });
        // 64 bytes further maps to set 0 again and evicts the first line.
        assert_eq!(c.access(0x1040), Access::Miss { set: 0, evicted: Some(0x1000) });
        assert_eq!(c.access(0x1000), Access::Miss { set: 0, evicted: Some(0x1040) });
        assert_eq!((c.hits, c.misses), (1, 4));
    }

    #[test]
    fn any_geometry_works() {
        let mut c = Cache::new(CacheConfig { lines: 3, line_bytes: 12, miss_penalty: 1 });
        assert_eq!(c.access(0), Access::Miss { set: 0, evicted: None });
        assert_eq!(c.access(36), Access::Miss { set: 0, evicted: Some(0) });
        let c = Cache::new(CacheConfig { lines: 0, line_bytes: 0, miss_penalty: 1 });
        assert_eq!((c.config().lines, c.config().line_bytes), (1, 4));
    }
}
