//! The table from C record ids to [`RecordHandle`]s of one trace.
//!
//! Sharded by id so threads working on different records rarely meet on a lock. A call on a
//! record holds that record's shard lock while it queues its line; `end` removes the handle under
//! the same lock. So a line accepted for a record is always queued before the record's end, and
//! after the end every use of the id is refused.
//!
//! To tell an ended record from an id that was never handed out, each shard also keeps the set
//! of ids it has seen, as a bitmap in 4096-id blocks: about one bit per record for the SDK's
//! dense ids (allocated in per-thread blocks), and bounded even if ids were sparse.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard};

use jets::RecordHandle;

use crate::codes::*;
use crate::failure::{Failure, Msg};
use crate::types::jets_id;

const SHARDS: usize = 32;

/// Ids are small sequential integers: hashing them is a multiply.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Ids ever inserted, as bitmap blocks of `BLOCK_BITS` ids.
#[derive(Default)]
struct IdSet(IdMap<Box<[u64; BLOCK_BITS / 64]>>);

const BLOCK_BITS: usize = 4096;

impl IdSet {
    fn split(key: u64) -> (u64, usize, u64) {
        let bit = (key % BLOCK_BITS as u64) as usize;
        (key / BLOCK_BITS as u64, bit / 64, 1u64 << (bit % 64))
    }
    fn insert(&mut self, key: u64) {
        let (block, word, mask) = Self::split(key);
        self.0.entry(block).or_insert_with(|| Box::new([0; BLOCK_BITS / 64]))[word] |= mask;
    }
    fn contains(&self, key: u64) -> bool {
        let (block, word, mask) = Self::split(key);
        self.0.get(&block).is_some_and(|b| b[word] & mask != 0)
    }
}

#[derive(Default)]
struct Shard {
    open: IdMap<RecordHandle>,
    seen: IdSet,
}

/// Open records by id.
pub(crate) struct Records {
    shards: [Mutex<Shard>; SHARDS],
}

impl Default for Records {
    fn default() -> Self {
        Records { shards: std::array::from_fn(|_| Mutex::default()) }
    }
}

impl Records {
    fn shard(&self, id: jets_id) -> MutexGuard<'_, Shard> {
        // A panic while holding the lock is caught at the boundary; the table itself stays valid.
        self.shards[id as usize % SHARDS].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the open record `id`, holding its shard lock.
    pub(crate) fn with<R>(
        &self,
        id: jets_id,
        what: &'static str,
        f: impl FnOnce(&RecordHandle) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let shard = self.shard(id);
        match shard.open.get(&id) {
            Some(handle) => f(handle),
            None => Err(missing(&shard, id, what)),
        }
    }

    /// Removes the open record `id` if `check` accepts it (otherwise it stays open).
    pub(crate) fn take(
        &self,
        id: jets_id,
        what: &'static str,
        check: impl FnOnce(&RecordHandle) -> Result<(), Failure>,
    ) -> Result<RecordHandle, Failure> {
        let mut shard = self.shard(id);
        let handle = shard.open.get(&id).ok_or_else(|| missing(&shard, id, what))?;
        check(handle)?;
        shard.open.remove(&id).ok_or_else(|| missing(&shard, id, what))
    }

    /// Makes a newly begun record known under `id`. The id is returned to C only after this.
    pub(crate) fn insert(&self, id: jets_id, handle: RecordHandle) -> jets_id {
        let mut shard = self.shard(id);
        shard.seen.insert(id / SHARDS as u64);
        shard.open.insert(id, handle);
        id
    }

    /// Drops every handle (the records stay open in the trace).
    pub(crate) fn clear(&self) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|p| p.into_inner()).open.clear();
        }
    }
}

/// Allocates nothing (it runs on the signal-safe path).
fn missing(shard: &Shard, id: jets_id, what: &'static str) -> Failure {
    if id == 0 {
        Failure::invalid(Msg::Id(what, 0, " (no record)"))
    } else if shard.seen.contains(id / SHARDS as u64) {
        Failure::new(JETS_ERR_RECORD_ENDED, Msg::Id(what, id, " has already ended"))
    } else {
        Failure::new(JETS_ERR_UNKNOWN_RECORD, Msg::Id(what, id, " was never begun in this trace"))
    }
}
