//! The ordering pass's memory: what it keeps per record id.
//!
//! Writers hand out ids densely (a counter, or per-thread blocks of a counter), so the table
//! starts as pages of 1024 consecutive ids: 24 bytes per id plus a presence bit, with no key and
//! no hash-table slack. If ids turn out scattered (pages mostly empty, more than 32 bytes per id
//! tracked), it switches once to a hash map of 32-byte entries (id + slot), which costs 37 to 75
//! bytes per id with the table's control bytes and growth slack but is independent of how ids are
//! spread.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// What is kept per record id: 24 bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Slot {
    pub start: u64,
    /// Valid when the record ended (a flag in `line`).
    pub end: u64,
    /// Line of the `record`, with flags in the top bits.
    pub line: u64,
}

/// Ids per page.
const PAGE: u64 = 1024;
/// Bytes a page costs.
const PAGE_BYTES: u64 = PAGE * std::mem::size_of::<Slot>() as u64 + PAGE / 8;
/// Pages allowed regardless of density (a few scattered roots cost nothing worth a switch).
const FREE_PAGES: u64 = 8;
/// Bytes per id tracked above which paging gives way to hashing.
const MAX_BYTES_PER_ID: u64 = 32;

pub(crate) struct Page {
    present: [u64; (PAGE / 64) as usize],
    slots: Box<[Slot]>,
}

impl Page {
    fn new() -> Page {
        Page {
            present: [0; (PAGE / 64) as usize],
            slots: vec![Slot::default(); PAGE as usize].into(),
        }
    }
    fn has(&self, i: usize) -> bool {
        self.present[i / 64] >> (i % 64) & 1 == 1
    }
}

type Map<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Record id → [`Slot`]; see the [module documentation](self).
pub(crate) enum IdTable {
    Paged { pages: Map<Page>, len: usize },
    Hashed(Map<Slot>),
}

impl Default for IdTable {
    fn default() -> Self {
        IdTable::Paged { pages: Map::default(), len: 0 }
    }
}

fn split(id: u64) -> (u64, usize) {
    (id / PAGE, (id % PAGE) as usize)
}

impl IdTable {
    pub fn get(&self, id: u64) -> Option<&Slot> {
        match self {
            IdTable::Paged { pages, .. } => {
                let (p, i) = split(id);
                pages.get(&p).filter(|pg| pg.has(i)).map(|pg| &pg.slots[i])
            }
            IdTable::Hashed(m) => m.get(&id),
        }
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Slot> {
        match self {
            IdTable::Paged { pages, .. } => {
                let (p, i) = split(id);
                pages.get_mut(&p).filter(|pg| pg.has(i)).map(|pg| &mut pg.slots[i])
            }
            IdTable::Hashed(m) => m.get_mut(&id),
        }
    }

    /// Inserts an id that is not in the table.
    pub fn insert(&mut self, id: u64, slot: Slot) {
        match self {
            IdTable::Paged { pages, len } => {
                let (p, i) = split(id);
                let page = pages.entry(p).or_insert_with(Page::new);
                page.present[i / 64] |= 1 << (i % 64);
                page.slots[i] = slot;
                *len += 1;
                let bytes = pages.len() as u64 * PAGE_BYTES;
                if pages.len() as u64 > FREE_PAGES && bytes > MAX_BYTES_PER_ID * *len as u64 {
                    self.rehash();
                }
            }
            IdTable::Hashed(m) => {
                m.insert(id, slot);
            }
        }
    }

    /// Ids are scattered: move to a hash map, once.
    fn rehash(&mut self) {
        let mut map = Map::with_capacity_and_hasher(self.len(), Default::default());
        map.extend(self.iter().map(|(id, s)| (id, *s)));
        *self = IdTable::Hashed(map);
    }

    pub fn len(&self) -> usize {
        match self {
            IdTable::Paged { len, .. } => *len,
            IdTable::Hashed(m) => m.len(),
        }
    }

    /// Every id and slot, in no particular order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (u64, &Slot)> + '_> {
        match self {
            IdTable::Paged { pages, .. } => Box::new(pages.iter().flat_map(|(p, pg)| {
                (0..PAGE as usize)
                    .filter(|i| pg.has(*i))
                    .map(move |i| (p * PAGE + i as u64, &pg.slots[i]))
            })),
            IdTable::Hashed(m) => Box::new(m.iter().map(|(id, s)| (*id, s))),
        }
    }

    /// Bytes the table holds, for the report (pages, or entries with the hash table's slack).
    pub fn bytes(&self) -> usize {
        match self {
            IdTable::Paged { pages, .. } => pages.len() * PAGE_BYTES as usize,
            IdTable::Hashed(m) => m.capacity() * (std::mem::size_of::<(u64, Slot)>() + 1),
        }
    }
}

/// Record ids are usually handed out in sequence, and a line mostly refers to a recent record.
/// The low 16 bits of the id index the table unchanged, so nearby ids share cache lines; the rest
/// is a multiply-fold mix, which also fills the top bits the table uses as tags. Trace ids are not
/// adversarial keys, so SipHash's cost buys nothing here.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        let n = n ^ self.0;
        let p = u128::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        let mixed = (p as u64) ^ ((p >> 64) as u64);
        self.0 = (mixed & !0xffff) | (n & 0xffff);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ids: &[u64]) -> IdTable {
        let mut t = IdTable::default();
        for (n, &id) in ids.iter().enumerate() {
            assert!(t.get(id).is_none());
            t.insert(id, Slot { start: id, end: 0, line: n as u64 });
        }
        assert_eq!(t.len(), ids.len());
        for (n, &id) in ids.iter().enumerate() {
            assert_eq!(t.get(id).map(|s| (s.start, s.line)), Some((id, n as u64)));
        }
        assert!(t.get(u64::MAX - 7).is_none() || ids.contains(&(u64::MAX - 7)));
        let mut seen: Vec<u64> = t.iter().map(|(id, _)| id).collect();
        seen.sort_unstable();
        let mut want = ids.to_vec();
        want.sort_unstable();
        assert_eq!(seen, want);
        t
    }

    #[test]
    fn dense_ids_stay_paged_within_32_bytes_each() {
        // Per-thread blocks of 256, interleaved, as the SDK's writer hands them out.
        let ids: Vec<u64> = (0..200_000u64)
            .map(|i| {
                let (t, k) = (i % 4, i / 4);
                ((k / 256) * 4 + t) * 256 + k % 256 + 1
            })
            .collect();
        let t = check(&ids);
        assert!(matches!(t, IdTable::Paged { .. }));
        assert!(t.bytes() <= 32 * ids.len(), "{} bytes for {} ids", t.bytes(), ids.len());
    }

    #[test]
    fn scattered_ids_switch_to_hashing() {
        let ids: Vec<u64> = (0..5000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let t = check(&ids);
        assert!(matches!(t, IdTable::Hashed(_)));
        let mut t = t;
        t.get_mut(ids[3]).unwrap().end = 9;
        assert_eq!(t.get(ids[3]).unwrap().end, 9);
    }

    #[test]
    fn extreme_ids() {
        check(&[0, u64::MAX, u64::MAX - 1, 1 << 63, 1023, 1024]);
    }
}
