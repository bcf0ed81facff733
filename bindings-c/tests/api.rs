//! The C API called from Rust exactly as C calls it: bad input is refused with the right code and
//! writes nothing, ids are told apart, errors are per thread, typed fields come out typed, and
//! concurrent use of one record from many threads never produces a line about an unknown record.

use std::ffi::{c_char, CStr, CString};
use std::path::Path;
use std::ptr::null;

use jets::format::Line;
use jets_c::*;

fn c(s: &CStr) -> *const c_char {
    s.as_ptr()
}

struct Open(*mut jets_trace);
// SAFETY: every call of the C API but `jets_close` may run on any thread, and the tests close
// the trace only after the threads that use it are joined.
unsafe impl Send for Open {}
// SAFETY: as for `Send`: the tests share the pointer between threads, never its closing.
unsafe impl Sync for Open {}

fn open(path: &Path) -> Open {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
    let mut t = std::ptr::null_mut();
    assert_eq!(
        // SAFETY: `p` and the metadata are NUL-terminated and live across the call; `t` is a
        // writable out pointer.
        unsafe { jets_open(p.as_ptr(), c(c"{\"hardware_model\":\"rust\"}"), &mut t) },
        JETS_OK
    );
    Open(t)
}

/// Options that set only `capture` (the default policy and sizes), as a program built against
/// this header makes them.
fn capture_options(capture: &'static CStr) -> jets_options {
    jets_options {
        size: std::mem::size_of::<jets_options>() as u32,
        policy: JETS_POLICY_BLOCK,
        queue_capacity: 0,
        flush_interval_us: 0,
        capture: capture.as_ptr(),
    }
}

/// [`open`] through `jets_open_ex`, with only `options->capture` set.
fn open_capture(path: &Path, capture: &'static CStr) -> Open {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
    let o = capture_options(capture);
    let mut t = std::ptr::null_mut();
    // SAFETY: `p` and the capture text are NUL-terminated; `o` is a whole `jets_options`; `t` is
    // a writable out pointer.
    let opened = unsafe { jets_open_ex(p.as_ptr(), null(), &o, &mut t) };
    assert_eq!(opened, JETS_OK, "{}", last_error());
    Open(t)
}

fn last_error() -> String {
    // SAFETY: jets_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(jets_last_error()) }.to_string_lossy().into_owned()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("read trace");
    text.lines()
        .map(|l| {
            Line::parse(l).unwrap_or_else(|e| panic!("not a JETS line ({e}): {l}"));
            serde_json::from_str(l).expect("json")
        })
        .collect()
}

#[test]
fn bad_input_is_refused_with_its_code_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path).0;
    // SAFETY: `t` is open until the jets_close at the end of the block; every string is NULL or a
    // NUL-terminated C-string literal (`\xff` is invalid UTF-8 on purpose, still NUL-terminated).
    unsafe {
        let root = jets_record_begin(t, 0, 10, c(c"root"), c(c"Root"), null(), null());
        assert_ne!(root, 0);
        assert_eq!(jets_flush(t), JETS_OK);
        let before = std::fs::metadata(&path).expect("stat").len();

        let bad_utf8 = c(c"\xff");
        let cases: Vec<(i32, &str)> = vec![
            (jets_event(t, root, 11, null(), null(), null()), "name is NULL"),
            (jets_event(t, root, 11, bad_utf8, null(), null()), "not valid UTF-8"),
            (jets_event(t, root, 11, c(c"e"), null(), c(c"{\"a\":")), "invalid JSON"),
            (jets_event(t, root, 9, c(c"e"), null(), null()), "before the start"),
            (jets_event(t, 77_777, 11, c(c"e"), null(), null()), "never begun"),
            (jets_annotation(t, root, c(c"a"), bad_utf8, null()), "description"),
            (jets_record_end(t, root, 9), "before the start"),
            (jets_set_clock(t, JETS_CLK_NOW), "JETS_CLK_NOW"),
        ];
        let codes = [
            JETS_ERR_INVALID_ARGUMENT,
            JETS_ERR_INVALID_UTF8,
            JETS_ERR_INVALID_JSON,
            JETS_ERR_CLK_BEFORE_START,
            JETS_ERR_UNKNOWN_RECORD,
            JETS_ERR_INVALID_UTF8,
            JETS_ERR_CLK_BEFORE_START,
            JETS_ERR_INVALID_ARGUMENT,
        ];
        for ((rc, _), want) in cases.iter().zip(codes) {
            assert_eq!(*rc, want);
        }
        assert_eq!(jets_record_begin(t, root, 11, c(c"r"), c(c"R"), null(), c(c"[1]")), 0);
        assert_eq!(jets_last_error_code(), JETS_ERR_INVALID_JSON);
        assert!(last_error().starts_with("jets_record_begin: "), "{}", last_error());
        assert_eq!(jets_flush(t), JETS_OK);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), before, "a refused call wrote");

        // The record refused an early end and is still open: it ends once.
        assert_eq!(jets_record_end(t, root, 12), JETS_OK);
        assert_eq!(jets_record_end(t, root, 12), JETS_ERR_RECORD_ENDED);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    assert_eq!(all.len(), 4, "header, record, record_end, footer");
    assert_eq!(all[3]["total_records"], 1);
}

#[test]
fn ended_and_never_begun_ids_are_told_apart_across_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = open(&dir.path().join("t.jets"));
    // SAFETY: `t` is open (closed at the end of the test); the strings are C-string literals.
    let root = unsafe { jets_record_begin(t.0, 0, 0, c(c"root"), c(c"Root"), null(), null()) };
    // Threads take ids from separate blocks, so ids are not dense: gaps are "never begun".
    let ids: Vec<jets_id> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let t = &t;
                // SAFETY: `t` stays open until after the scope joins this thread; the strings are
                // C-string literals.
                s.spawn(move || unsafe {
                    let id = jets_record_begin(t.0, root, 1, c(c"r"), c(c"R"), null(), null());
                    assert_ne!(id, 0, "{}", last_error());
                    assert_eq!(jets_record_end(t.0, id, 2), JETS_OK);
                    id
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    // SAFETY: `t` is open until the jets_close at the end of the block, after the threads are
    // joined; the strings are C-string literals.
    unsafe {
        for &id in &ids {
            assert_eq!(jets_event(t.0, id, 3, c(c"e"), null(), null()), JETS_ERR_RECORD_ENDED);
            assert!(last_error().contains("already ended"));
            for probe in [id + 1, id + 100, id + 1_000_000] {
                if !ids.contains(&probe) && probe != root {
                    let rc = jets_event(t.0, probe, 3, c(c"e"), null(), null());
                    assert_eq!(rc, JETS_ERR_UNKNOWN_RECORD, "id {probe}");
                }
            }
        }
        assert_eq!(jets_event(t.0, 0, 3, c(c"e"), null(), null()), JETS_ERR_INVALID_ARGUMENT);
        assert_eq!(jets_close(t.0), JETS_OK);
    }
}

#[test]
fn the_last_error_belongs_to_the_calling_thread() {
    // SAFETY: NULL trace is a documented error.
    assert_eq!(unsafe { jets_flush(std::ptr::null_mut()) }, JETS_ERR_INVALID_ARGUMENT);
    assert_eq!(last_error(), "jets_flush: trace is NULL");
    std::thread::spawn(|| {
        assert_eq!(jets_last_error_code(), JETS_OK);
        assert_eq!(last_error(), "");
        // SAFETY: NULL text is a documented error.
        assert_eq!(unsafe { jets_intern(null()) }, 0);
        assert_eq!(last_error(), "jets_intern: text is NULL");
    })
    .join()
    .expect("thread");
    assert_eq!(last_error(), "jets_flush: trace is NULL");
    // SAFETY: a static string.
    let name = unsafe { CStr::from_ptr(jets_status_name(JETS_ERR_UNKNOWN_STRING)) };
    assert_eq!(name.to_str(), Ok("JETS_ERR_UNKNOWN_STRING"));
}

#[test]
fn interned_names_and_typed_fields_are_written_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path).0;
    // SAFETY: `t` is open until the jets_close_at at the end of the block; the strings are C-string
    // literals; `a`, `old`, `newer` and `fields` outlive the calls that read them; each
    // `field_count` is at most `fields.len()`; a `size` below ours is read as a prefix or refused,
    // and `newer`'s larger one makes the library read only the `jets_attrs` it knows, all inside
    // `newer.a`.
    unsafe {
        let h = |s: &CStr| jets_intern(s.as_ptr());
        assert_eq!(h(c"same"), h(c"same"));
        let fields = [
            jets_field { key: h(c"u"), kind: JETS_FIELD_U64, value: jets_value { u64: u64::MAX } },
            jets_field { key: h(c"i"), kind: JETS_FIELD_I64, value: jets_value { i64: i64::MIN } },
            jets_field { key: h(c"f"), kind: JETS_FIELD_F64, value: jets_value { f64: 2.5 } },
            jets_field {
                key: h(c"nan"),
                kind: JETS_FIELD_F64,
                value: jets_value { f64: f64::NAN },
            },
            jets_field { key: h(c"b"), kind: JETS_FIELD_BOOL, value: jets_value { u64: 1 } },
            jets_field {
                key: h(c"s"),
                kind: JETS_FIELD_STR,
                value: jets_value { str: h(c"x\"y") },
            },
        ];
        let mut a = jets_attrs {
            size: std::mem::size_of::<jets_attrs>() as u32,
            name: h(c"core0"),
            record_type: h(c"Core"),
            description: h(c"a core"),
            fields: fields.as_ptr(),
            field_count: fields.len(),
            data_json: c(c"{\"extra\":[1,2]}"),
            domain: 0,
            clock: 0,
        };
        let core = jets_record_begin_ex(t, 0, 5, &a);
        assert_ne!(core, 0, "{}", last_error());
        // A caller built against the first, shorter jets_attrs (no domain, no clock) still works;
        // anything shorter is refused.
        let mut old = a;
        old.size = std::mem::offset_of!(jets_attrs, domain) as u32;
        old.domain = 77; // beyond the caller's struct: never read
        let ended_early = jets_record_begin_ex(t, core, 5, &old);
        assert_ne!(ended_early, 0, "{}", last_error());
        assert_eq!(jets_record_end(t, ended_early, 5), JETS_OK);
        old.size -= 8;
        assert_eq!(jets_record_begin_ex(t, core, 5, &old), 0);
        assert_eq!(jets_last_error_code(), JETS_ERR_INVALID_ARGUMENT);
        a.data_json = null();
        a.field_count = 2;
        // JETS_CLK_NOW with the trace clock still 0: clamped to the record's start, 5.
        assert_eq!(jets_event_ex(t, core, JETS_CLK_NOW, &a), JETS_OK);
        // A larger struct from a newer header is fine; one smaller than the first version is
        // refused.
        #[repr(C)]
        struct Newer {
            a: jets_attrs,
            future: u64,
        }
        let mut newer = Newer { a, future: 7 };
        newer.a.size = std::mem::size_of::<Newer>() as u32;
        assert_eq!(jets_annotation_ex(t, core, &newer.a), JETS_OK);
        a.size = std::mem::offset_of!(jets_attrs, domain) as u32 - 8;
        assert_eq!(jets_annotation_ex(t, core, &a), JETS_ERR_INVALID_ARGUMENT);
        // Children with typed fields alone (0 to 4: begun without a builder) and one with a
        // description too (through it).
        a.size = std::mem::size_of::<jets_attrs>() as u32;
        a.description = 0;
        for n in 0..=4 {
            a.field_count = n;
            let child = jets_record_begin_ex(t, core, 6, &a);
            assert_ne!(child, 0, "{}", last_error());
            assert_eq!(jets_record_end(t, child, 7), JETS_OK);
        }
        a.description = h(c"a core");
        let child = jets_record_begin_ex(t, core, 6, &a);
        assert_eq!(jets_record_end(t, child, 7), JETS_OK);
        assert_eq!(jets_close_at(t, 50), JETS_OK);
    }
    let all = lines(&path);
    let rec = &all[1];
    assert_eq!(rec["name"], "core0");
    assert_eq!(rec["description"], "a core");
    let d = &rec["data"];
    assert_eq!(d["u"], u64::MAX);
    assert_eq!(d["i"], i64::MIN);
    assert_eq!(d["f"], 2.5);
    assert!(d["nan"].is_null());
    assert_eq!(d["b"], true);
    assert_eq!(d["s"], "x\"y");
    assert_eq!(d["extra"], serde_json::json!([1, 2]));
    // all[2] and all[3]: the record begun with the first version's struct, and its end.
    assert_eq!(all[2]["parent_id"], rec["id"]);
    assert_eq!(all[4]["clk"], 5);
    assert_eq!(all[4]["data"], serde_json::json!({"u": u64::MAX, "i": i64::MIN}));
    assert_eq!(all[5]["type"], "annotation");
    let children: Vec<_> = all.iter().filter(|l| l["type"] == "record" && l["clk"] == 6).collect();
    let want = [
        ("u", serde_json::json!(u64::MAX)),
        ("i", serde_json::json!(i64::MIN)),
        ("f", serde_json::json!(2.5)),
        ("nan", serde_json::Value::Null),
    ];
    for (n, child) in children.iter().enumerate().take(5) {
        assert_eq!(child["parent_id"], rec["id"], "{child}");
        assert_eq!(child["description"], "", "{child}");
        let data: serde_json::Map<_, _> =
            want.iter().take(n).map(|(k, v)| (k.to_string(), v.clone())).collect();
        match n {
            0 => assert!(child.get("data").is_none_or(|d| d == &serde_json::json!({})), "{child}"),
            _ => assert_eq!(child["data"], serde_json::Value::Object(data), "{child}"),
        }
    }
    assert_eq!(children[5]["description"], "a core");
    assert_eq!(children[5]["data"], children[4]["data"]);
    assert_eq!(all.last().expect("lines")["capture_end_clk"], 50);
}

#[test]
fn many_threads_on_one_record_while_it_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path);
    // SAFETY: `t` is open until the jets_close at the end, after the threads are joined; the
    // strings are C-string literals.
    let shared = unsafe { jets_record_begin(t.0, 0, 0, c(c"shared"), c(c"Unit"), null(), null()) };
    let accepted: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let t = &t;
                s.spawn(move || {
                    let mut ok = 0u64;
                    for i in 0..2_000u64 {
                        // SAFETY: `t` is open until after the scope joins this thread.
                        match unsafe { jets_event(t.0, shared, i, c(c"e"), null(), null()) } {
                            JETS_OK => ok += 1,
                            JETS_ERR_RECORD_ENDED => break,
                            rc => panic!("unexpected {rc}: {}", last_error()),
                        }
                    }
                    ok
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(2));
        // SAFETY: `t` is open; ending a record while other threads emit on it is allowed (their
        // calls then return JETS_ERR_RECORD_ENDED).
        assert_eq!(unsafe { jets_record_end(t.0, shared, 10_000) }, JETS_OK);
        workers.into_iter().map(|w| w.join().expect("worker")).sum()
    });
    // SAFETY: `t` is open, and every thread that used it has been joined by the scope above.
    assert_eq!(unsafe { jets_close(t.0) }, JETS_OK);
    let all = lines(&path);
    let events = all.iter().filter(|l| l["type"] == "event").count() as u64;
    assert_eq!(events, accepted, "every accepted event is in the file, and only those");
    assert_eq!(all.last().expect("footer")["total_events"], accepted);
}

#[test]
fn options_select_the_drop_policy_and_are_size_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("drop.jets");
    let p = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
    // The struct as a program built against the first header has it: no `capture` member.
    let first = std::mem::offset_of!(jets_options, capture) as u32;
    let mut o = jets_options {
        size: first,
        policy: JETS_POLICY_DROP,
        queue_capacity: 16,
        flush_interval_us: 1_000,
        // Past `size`: never read (were it, this open would fail on the bad clause).
        capture: c"clk=9..3".as_ptr(),
    };
    let mut t = std::ptr::null_mut();
    // SAFETY: `p` is NUL-terminated; `o` is a whole `jets_options` (the first open claims one
    // byte fewer than the first version, which it refuses after reading only `size`); `t` is a
    // writable out pointer, then open until the jets_close at the end of the block.
    unsafe {
        o.size -= 1;
        assert_eq!(jets_open_ex(p.as_ptr(), null(), &o, &mut t), JETS_ERR_INVALID_ARGUMENT);
        assert!(t.is_null());
        assert!(!path.exists(), "a refused open created the file");
        o.size += 1;
        assert_eq!(jets_open_ex(p.as_ptr(), null(), &o, &mut t), JETS_OK, "{}", last_error());
        let root = jets_record_begin(t, 0, 0, c(c"root"), c(c"Root"), null(), null());
        for clk in 0..20_000 {
            assert_eq!(jets_event(t, root, clk, c(c"e"), null(), null()), JETS_OK);
        }
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    let footer = all.last().expect("footer");
    let written = all.iter().filter(|l| l["type"] == "event").count() as u64;
    let dropped = footer["dropped_events"].as_u64().expect("dropped_events in the footer");
    assert_eq!(written + dropped, 20_000, "every event is written or counted as dropped");
}

/// CAP-DEFER-2 through the C API, whose records live in a table any thread ends them from: a
/// record held before the window, whose parent ends on another thread while it is alive, is
/// written with that parent once a line under it falls in the window, whichever thread writes
/// that line and ends the record.
#[test]
fn a_record_that_outlives_its_held_parent_is_written_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("outlived.jets");
    let t = open_capture(&path, c"clk=100..200");
    // SAFETY: here and in the threads below, `t` is open until the jets_close below, after every
    // thread that uses it is joined; the texts are NUL-terminated.
    let (root, units) = unsafe {
        let root = jets_record_begin(t.0, 0, 0, c(c"root"), c(c"Root"), null(), null());
        let units: Vec<(jets_id, jets_id)> = (0..8u64)
            .map(|i| {
                let core = jets_record_begin(t.0, root, i, c(c"core"), c(c"Core"), null(), null());
                let unit = jets_record_begin(t.0, core, i, c(c"unit"), c(c"Unit"), null(), null());
                (core, unit)
            })
            .collect();
        (root, units)
    };
    std::thread::scope(|s| {
        let (t, units) = (&t, &units);
        // Each parent ends on another thread, before anything under its child is captured.
        s.spawn(move || {
            for (i, &(core, _)) in units.iter().enumerate() {
                // SAFETY: as above.
                assert_eq!(unsafe { jets_record_end(t.0, core, 10 + i as u64) }, JETS_OK);
            }
        });
    });
    // SAFETY: as above.
    assert_eq!(unsafe { jets_flush(t.0) }, JETS_OK);
    std::thread::scope(|s| {
        let t = &t;
        for (i, &(_, unit)) in units.iter().enumerate() {
            s.spawn(move || {
                // SAFETY: as above. Half of the units get a line in the window.
                unsafe {
                    if i % 2 == 0 {
                        assert_eq!(jets_event(t.0, unit, 150, c(c"e"), null(), null()), JETS_OK);
                    }
                    assert_eq!(jets_record_end(t.0, unit, 160), JETS_OK);
                }
            });
        }
    });
    // SAFETY: as above.
    unsafe {
        assert_eq!(jets_record_end(t.0, root, 300), JETS_OK);
        assert_eq!(jets_close(t.0), JETS_OK);
    }
    let all = lines(&path);
    let mut seen = std::collections::HashSet::new();
    for l in all.iter().filter(|l| l["type"] == "record") {
        if let Some(parent) = l["parent_id"].as_u64() {
            assert!(seen.contains(&parent), "{l}: its parent is not before it");
        }
        seen.insert(l["id"].as_u64().expect("id"));
    }
    let names = |n: &str| all.iter().filter(|l| l["type"] == "record" && l["name"] == n).count();
    assert_eq!((names("root"), names("core"), names("unit")), (1, 4, 4));
}

/// `options->capture` sets capture in code: it wins over `JETS_CAPTURE` (which this test process
/// does not set; the C test `capture_test` sets it and checks the variable alone), and a bad
/// clause fails the open, naming it, before the file is made.
#[test]
fn options_capture_selects_what_is_written_and_a_bad_clause_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("window.jets");
    let p = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
    let mut o = capture_options(c"clk=9..3");
    let mut t = std::ptr::null_mut();
    // SAFETY: `p` and the capture texts are NUL-terminated; `o` is a whole `jets_options`; `t`
    // is a writable out pointer, then open until the jets_close at the end of the block.
    unsafe {
        assert_eq!(jets_open_ex(p.as_ptr(), null(), &o, &mut t), JETS_ERR_INVALID_ARGUMENT);
        assert!(t.is_null());
        assert_eq!(
            last_error(),
            "jets_open: options->capture: JETS_CAPTURE clause `clk=9..3`: the window is empty \
             (9 is not below 3)"
        );
        assert!(!path.exists(), "a refused open created the file");
        o.capture = c"clk=10..20;every=100".as_ptr();
        assert_eq!(jets_open_ex(p.as_ptr(), null(), &o, &mut t), JETS_OK, "{}", last_error());
        let root = jets_record_begin(t, 0, 0, c(c"root"), c(c"Root"), null(), null());
        for clk in 0..300 {
            assert_eq!(jets_event(t, root, clk, c(c"e"), null(), null()), JETS_OK);
        }
        assert_eq!(jets_record_end(t, root, 300), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    let clks: Vec<u64> = all
        .iter()
        .filter(|l| l["type"] == "event")
        .map(|l| l["clk"].as_u64().expect("clk"))
        .collect();
    let want: Vec<u64> = (10..20).chain(110..120).chain(210..220).collect();
    assert_eq!(clks, want);
    assert_eq!(all.last().expect("footer")["capture"], "clk=10..20;every=100");
}

/// `units=` through the C API (CAP-FILT-1): a record whose `unit_id` comes in `data_json`, the
/// plain call's only way to give it, is selected by its unit like a typed one. Before, the unit
/// filter read typed fields only, and such records were held and never written.
#[test]
fn a_unit_in_data_json_is_selected_by_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("units.jets");
    let t = open_capture(&path, c"units=3");
    // SAFETY: `t.0` is open until the jets_close below; the strings are NUL-terminated.
    unsafe {
        let root = jets_record_begin(t.0, 0, 0, c(c"core"), c(c"Core"), null(), null());
        for (name, data) in [(c"alu", c"{\"unit_id\":3}"), (c"lsu", c"{\"unit_id\":4}")] {
            let r = jets_record_begin(t.0, root, 1, c(name), c(c"Unit"), null(), c(data));
            assert_ne!(r, 0, "{}", last_error());
            assert_eq!(jets_event(t.0, r, 2, c(c"busy"), null(), null()), JETS_OK);
            assert_eq!(jets_record_end(t.0, r, 3), JETS_OK);
        }
        assert_eq!(jets_record_end(t.0, root, 4), JETS_OK);
        assert_eq!(jets_close(t.0), JETS_OK);
    }
    let all = lines(&path);
    let names = |ty: &str| -> Vec<String> {
        let of_type = all.iter().filter(|l| l["type"] == ty);
        of_type.map(|l| l["name"].as_str().expect("name").to_owned()).collect()
    };
    assert_eq!(names("record"), ["core", "alu"]);
    assert_eq!(names("event"), ["busy"]);
}

/// `limit=` through the C API (CAP-LIM-1): `jets_limit_reached` turns 1 once the file holds the
/// size, `jets_capture_on` no longer turns capture on, the file ends a little past the size and
/// its footer says the limit was reached; a NULL trace is an error, not an answer.
#[test]
fn a_size_limit_stops_capture_and_jets_limit_reached_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("limited.jets");
    // SAFETY: a NULL trace is refused, not read.
    assert!(unsafe { jets_limit_reached(std::ptr::null_mut()) } < 0, "a NULL trace is an error");
    let t = open_capture(&path, c"limit=64KiB").0;
    let mut events = 0u64;
    // SAFETY: `t` is open until the jets_close at the end of the block; the texts are
    // NUL-terminated.
    unsafe {
        let root = jets_record_begin(t, 0, 0, c(c"root"), c(c"Root"), null(), null());
        assert_eq!(jets_limit_reached(t), 0);
        while jets_limit_reached(t) == 0 {
            assert_eq!(jets_event(t, root, events, c(c"e"), null(), null()), JETS_OK);
            events += 1;
            if events % 256 == 0 {
                assert_eq!(jets_flush(t), JETS_OK);
            }
            assert!(events < 10_000_000, "the limit was never reached");
        }
        assert_eq!(jets_capture_on(t), JETS_OK);
        assert_eq!(jets_event(t, root, events, c(c"after"), null(), null()), JETS_OK);
        assert_eq!(jets_limit_reached(t), 1);
        assert_eq!(jets_record_end(t, root, events + 1), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let size = std::fs::metadata(&path).expect("the trace").len();
    assert!(size >= 64 << 10 && size < (64 << 10) + jets::WRITE_BATCH_BYTES as u64, "{size} bytes");
    let all = lines(&path);
    assert!(all.iter().all(|l| l["name"] != "after"), "an event after the limit was written");
    let footer = all.last().expect("footer");
    assert_eq!(footer["capture"], "limit=64KiB");
    assert_eq!(footer["limit_reached"], true);
    let written = all.iter().filter(|l| l["type"] == "event").count() as u64;
    assert_eq!(footer["left_out_events"].as_u64(), Some(events + 1 - written));
}

#[test]
fn an_ended_records_slot_is_reused_and_its_old_id_still_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path);
    // SAFETY: `t` is open until the jets_close at the end; the strings are C-string literals.
    unsafe {
        let first = jets_record_begin(t.0, 0, 0, c(c"a"), c(c"R"), null(), null());
        assert_eq!(jets_record_end(t.0, first, 1), JETS_OK);
        let second = jets_record_begin(t.0, 0, 2, c(c"b"), c(c"R"), null(), null());
        // The same slot (bits 0-31), the next generation: the old id cannot reach the new record.
        assert_eq!(first & 0xffff_ffff, second & 0xffff_ffff);
        assert_ne!(first, second);
        assert_eq!(jets_event(t.0, first, 3, c(c"e"), null(), null()), JETS_ERR_RECORD_ENDED);
        assert_eq!(jets_record_end(t.0, first, 3), JETS_ERR_RECORD_ENDED);
        // A generation not handed out yet was never begun.
        let ahead = second + (1 << 32);
        assert_eq!(jets_event(t.0, ahead, 3, c(c"e"), null(), null()), JETS_ERR_UNKNOWN_RECORD);
        assert_eq!(jets_event(t.0, second, 3, c(c"e"), null(), null()), JETS_OK);
        assert_eq!(jets_record_end(t.0, second, 4), JETS_OK);
        assert_eq!(jets_close(t.0), JETS_OK);
    }
    let all = lines(&path);
    let ends: Vec<_> = all.iter().filter(|l| l["type"] == "record_end").collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(all.iter().filter(|l| l["type"] == "event").count(), 1);
}

#[test]
fn records_begun_used_and_ended_from_many_threads_end_once_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path);
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 3_000;
    // Each thread begins records, and ends the records the previous thread began (handed over
    // through a shared list), while events land on them: slots are reused across threads and
    // ends race with events.
    let handoff: Vec<std::sync::Mutex<Vec<jets_id>>> =
        (0..THREADS).map(|_| std::sync::Mutex::new(Vec::new())).collect();
    let (accepted, ended): (u64, u64) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|me| {
                let (t, handoff) = (&t, &handoff);
                s.spawn(move || {
                    let (mut events, mut ends) = (0u64, 0u64);
                    for i in 0..PER_THREAD {
                        // SAFETY: `t` is open until after the scope joins this thread; the
                        // strings are C-string literals.
                        unsafe {
                            let id = jets_record_begin(t.0, 0, i, c(c"r"), c(c"R"), null(), null());
                            assert_ne!(id, 0, "{}", last_error());
                            handoff[me].lock().expect("list").push(id);
                            let theirs = handoff[(me + 1) % THREADS].lock().expect("list").pop();
                            for r in [Some(id), theirs].into_iter().flatten() {
                                match jets_event(t.0, r, JETS_CLK_NOW, c(c"e"), null(), null()) {
                                    JETS_OK => events += 1,
                                    JETS_ERR_RECORD_ENDED => {}
                                    rc => panic!("event: {rc} {}", last_error()),
                                }
                            }
                            if let Some(r) = theirs {
                                match jets_record_end(t.0, r, JETS_CLK_NOW) {
                                    JETS_OK => ends += 1,
                                    rc => panic!("end: {rc} {}", last_error()),
                                }
                            }
                        }
                    }
                    (events, ends)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    });
    // SAFETY: every thread that used `t` has been joined.
    assert_eq!(unsafe { jets_close(t.0) }, JETS_OK);
    let all = lines(&path);
    let count = |kind: &str| all.iter().filter(|l| l["type"] == kind).count() as u64;
    assert_eq!(count("record"), THREADS as u64 * PER_THREAD);
    assert_eq!(count("record_end"), ended, "each accepted end written once");
    assert_eq!(count("event"), accepted, "every accepted event written");
    let footer = all.last().expect("footer");
    assert_eq!(footer["open_records"], THREADS as u64 * PER_THREAD - ended);
}

#[test]
fn event_ex_writes_and_refuses_the_same_on_its_fast_and_general_paths() {
    // jets_event_ex takes a fast path for the common shape and the general one for anything
    // else; a `jets_attrs` of the first version (shorter `size`) always takes the general path.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path).0;
    // SAFETY: `t` is open until the jets_close at the end of the block; the strings are C-string
    // literals; `fields` and every `jets_attrs` outlive the calls that read them, and each
    // `field_count` is at most `fields.len()` (or `fields` is NULL, which is refused).
    unsafe {
        let h = |s: &CStr| jets_intern(s.as_ptr());
        let root = jets_record_begin(t, 0, 10, c(c"root"), c(c"Root"), null(), null());
        let ended = jets_record_begin(t, root, 10, c(c"gone"), c(c"Gone"), null(), null());
        assert_eq!(jets_record_end(t, ended, 10), JETS_OK);
        let fields = [
            jets_field { key: h(c"u"), kind: JETS_FIELD_U64, value: jets_value { u64: 7 } },
            jets_field { key: h(c"s"), kind: JETS_FIELD_STR, value: jets_value { str: h(c"x") } },
            jets_field { key: h(c"t"), kind: JETS_FIELD_TEXT, value: jets_value { text: c(c"y") } },
            jets_field { key: h(c"b"), kind: JETS_FIELD_BOOL, value: jets_value { u64: 1 } },
        ];
        let full = jets_attrs {
            size: std::mem::size_of::<jets_attrs>() as u32,
            name: h(c"E"),
            record_type: 0,
            description: 0,
            fields: fields.as_ptr(),
            field_count: 0,
            data_json: null(),
            domain: 0,
            clock: 0,
        };
        let first = jets_attrs { size: std::mem::offset_of!(jets_attrs, domain) as u32, ..full };
        for n in 0..=fields.len() {
            for a in [full, first] {
                assert_eq!(
                    jets_event_ex(t, root, 20 + n as u64, &jets_attrs { field_count: n, ..a }),
                    JETS_OK
                );
            }
        }
        assert_eq!(jets_flush(t), JETS_OK);
        let before = std::fs::metadata(&path).expect("stat").len();

        let mut bad = fields;
        bad[1].kind = 99;
        let mut null_text = fields;
        null_text[2].value.text = null();
        let mut unknown_key = fields;
        unknown_key[3].key = 999_999;
        let refusals: Vec<(jets_id, u64, jets_attrs, i32)> = vec![
            (
                root,
                30,
                jets_attrs { fields: bad.as_ptr(), field_count: 2, ..full },
                JETS_ERR_INVALID_ARGUMENT,
            ),
            (
                root,
                30,
                jets_attrs { fields: null_text.as_ptr(), field_count: 3, ..full },
                JETS_ERR_INVALID_ARGUMENT,
            ),
            (
                root,
                30,
                jets_attrs { fields: unknown_key.as_ptr(), field_count: 4, ..full },
                JETS_ERR_UNKNOWN_STRING,
            ),
            (
                root,
                30,
                jets_attrs { fields: std::ptr::null(), field_count: 2, ..full },
                JETS_ERR_INVALID_ARGUMENT,
            ),
            (root, 30, jets_attrs { name: 0, ..full }, JETS_ERR_INVALID_ARGUMENT),
            (root, 30, jets_attrs { name: 999_999, ..full }, JETS_ERR_UNKNOWN_STRING),
            (root, 9, full, JETS_ERR_CLK_BEFORE_START),
            (ended, 30, full, JETS_ERR_RECORD_ENDED),
            (77_777, 30, full, JETS_ERR_UNKNOWN_RECORD),
        ];
        for (record, clk, a, code) in refusals {
            let mut messages = Vec::new();
            for a in [a, jets_attrs { size: first.size, ..a }] {
                assert_eq!(jets_event_ex(t, record, clk, &a), code, "{}", last_error());
                assert_eq!(jets_last_error_code(), code);
                messages.push(last_error());
            }
            assert!(messages[0].starts_with("jets_event_ex: "), "{}", messages[0]);
            assert_eq!(messages[0], messages[1], "the two paths name the failure alike");
        }
        assert_eq!(jets_flush(t), JETS_OK);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), before, "a refused call wrote");
        assert_eq!(jets_close(t), JETS_OK);
    }
    let events: Vec<_> = lines(&path).into_iter().filter(|l| l["type"] == "event").collect();
    assert_eq!(events.len(), 10);
    let want = [
        serde_json::json!({}),
        serde_json::json!({"u": 7}),
        serde_json::json!({"u": 7, "s": "x"}),
        serde_json::json!({"u": 7, "s": "x", "t": "y"}),
        serde_json::json!({"u": 7, "s": "x", "t": "y", "b": true}),
    ];
    let empty = serde_json::json!({});
    for (pair, want) in events.chunks(2).zip(want) {
        assert_eq!(pair[0], pair[1], "fast and general paths wrote different lines");
        let data = &pair[0]["data"];
        assert_eq!(if data.is_null() { &empty } else { data }, &want);
    }
}

/// Rule CA-JSON-2: the plain-string `description` and `data_json` of a line that capture leaves
/// out are neither copied nor parsed (as a Rust builder's `data_json`, and as with tracing
/// switched off, CA-OFF-1): text that is not JSON is no error there, and is refused as soon as
/// the line would be written.
#[test]
fn text_of_a_line_capture_leaves_out_is_not_parsed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path).0;
    let bad = c(c"{\"a\":");
    // SAFETY: `t` is open until the jets_close at the end of the block; every string is NULL or a
    // NUL-terminated C-string literal.
    unsafe {
        let root = jets_record_begin(t, 0, 10, c(c"root"), c(c"Root"), null(), null());
        assert_ne!(root, 0);
        assert_eq!(jets_capture_off(t), JETS_OK);
        assert_eq!(jets_event(t, root, 11, c(c"e"), null(), bad), JETS_OK);
        assert_eq!(jets_annotation(t, root, c(c"a"), null(), bad), JETS_OK);
        let left = jets_record_begin(t, root, 11, c(c"r"), c(c"R"), null(), bad);
        assert_ne!(left, 0, "{}", last_error());
        assert_eq!(jets_event(t, left, 12, c(c"e"), c(c"d"), bad), JETS_OK);
        assert_eq!(jets_record_end(t, left, 12), JETS_OK);
        // The same through the interned API.
        let ex = jets_attrs {
            size: std::mem::size_of::<jets_attrs>() as u32,
            name: jets_intern(c(c"e")),
            record_type: 0,
            description: 0,
            fields: null(),
            field_count: 0,
            data_json: bad,
            domain: 0,
            clock: 0,
        };
        assert_eq!(jets_event_ex(t, root, 11, &ex), JETS_OK);
        // NULL and UTF-8 are still checked at the call, whatever capture does.
        assert_eq!(jets_event(t, root, 11, c(c"e"), c(c"\xff"), null()), JETS_ERR_INVALID_UTF8);

        assert_eq!(jets_capture_on(t), JETS_OK);
        assert_eq!(jets_event(t, root, 13, c(c"e"), null(), bad), JETS_ERR_INVALID_JSON);
        assert_eq!(jets_event_ex(t, root, 13, &ex), JETS_ERR_INVALID_JSON);
        let strict = jets_attrs { data_json: c(c"[1e999]"), ..ex };
        assert_eq!(jets_event_ex(t, root, 13, &strict), JETS_ERR_INVALID_JSON, "CA-JSON-1");
        assert_eq!(jets_annotation(t, root, c(c"a"), null(), bad), JETS_ERR_INVALID_JSON);
        assert_eq!(jets_record_begin(t, root, 13, c(c"r"), c(c"R"), null(), bad), 0);
        assert_eq!(jets_last_error_code(), JETS_ERR_INVALID_JSON);
        assert_eq!(jets_event(t, root, 13, c(c"e"), c(c"kept"), c(c"{\"a\":1}")), JETS_OK);
        assert_eq!(jets_record_end(t, root, 14), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    let events: Vec<_> = all.iter().filter(|l| l["type"] == "event").collect();
    assert_eq!(events.len(), 1, "{all:#?}");
    assert_eq!((&events[0]["description"], &events[0]["data"]["a"]), (&"kept".into(), &1.into()));
    let footer = all.last().expect("footer");
    assert_eq!(footer["type"], "footer");
    let left_out = ["left_out_events", "left_out_annotations", "left_out_records"]
        .map(|k| footer[k].as_u64().unwrap_or_else(|| panic!("no {k} in {footer}")));
    assert_eq!(left_out, [3, 1, 1], "{footer}");
}

/// `jets_field_u64(key, value)`.
fn jets_field_u64_of(key: jets_str, value: u64) -> jets_field {
    jets_field { key, kind: JETS_FIELD_U64, value: jets_value { u64: value } }
}

/// CA-LEFT-1: every record capture leaves out gets `JETS_ID_LEFT_OUT` (begun while capture is
/// off, whatever its parent; under a record left out; past the window's end), every call on it
/// succeeds and writes nothing, and the footer counts each of its lines as left out, exactly.
#[test]
fn records_capture_leaves_out_share_one_id_and_every_line_is_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open_capture(&path, c"clk=0..100").0;
    // SAFETY: `t` is open until the jets_close at the end of the block; every string is NULL or a
    // NUL-terminated C-string literal; each `jets_attrs` is whole and its fields live across the
    // calls that use it.
    unsafe {
        let (insn, pc, ev) =
            (jets_intern(c(c"Instruction")), jets_intern(c(c"pc")), jets_intern(c(c"EX")));
        let f = [jets_field_u64_of(pc, 4)];
        let rec = jets_attrs {
            name: insn,
            record_type: insn,
            fields: f.as_ptr(),
            field_count: 1,
            ..jets_attrs::default()
        };
        let event =
            jets_attrs { name: ev, fields: f.as_ptr(), field_count: 1, ..jets_attrs::default() };
        let root = jets_record_begin(t, 0, 0, c(c"core"), c(c"Core"), null(), null());
        assert!(root != 0 && root != JETS_ID_LEFT_OUT);

        assert_eq!(jets_capture_off(t), JETS_OK);
        // While off, the parent is not looked up: a record is left out whatever it is under.
        let off = jets_record_begin_ex(t, root, 10, &rec);
        assert_eq!(off, JETS_ID_LEFT_OUT, "{}", last_error());
        assert_eq!(jets_record_begin_ex(t, 12345, 10, &rec), JETS_ID_LEFT_OUT);
        assert_eq!(
            jets_record_begin(t, root, 10, c(c"r"), c(c"R"), null(), null()),
            JETS_ID_LEFT_OUT
        );
        assert_eq!(jets_event_ex(t, off, 11, &event), JETS_OK);
        assert_eq!(jets_event_ex(t, root, 11, &event), JETS_OK);
        assert_eq!(jets_event(t, off, 11, c(c"e"), null(), null()), JETS_OK);
        // Nor is an event's record looked up.
        assert_eq!(jets_event(t, 12345, 11, c(c"e"), null(), null()), JETS_OK);
        assert_eq!(jets_annotation_ex(t, off, &event), JETS_OK);
        assert_eq!(jets_counter(t, off, 11, ev, 2.0), JETS_OK);
        let pushed = jets_push(t, 11, &rec);
        assert_eq!(pushed, JETS_ID_LEFT_OUT, "{}", last_error());
        assert_eq!(jets_push(t, 11, &rec), JETS_ID_LEFT_OUT);
        assert_eq!(jets_pop(t, 12), JETS_OK);
        assert_eq!(jets_pop(t, 12), JETS_OK);

        assert_eq!(jets_capture_on(t), JETS_OK);
        // Left out with its parent, and past the window's end.
        assert_eq!(jets_record_begin_ex(t, off, 20, &rec), JETS_ID_LEFT_OUT);
        assert_eq!(jets_record_begin_ex(t, root, 100, &rec), JETS_ID_LEFT_OUT);
        assert_eq!(jets_event_ex(t, off, 20, &event), JETS_OK);
        assert_eq!(jets_record_end(t, off, 30), JETS_OK);
        assert_eq!(jets_record_end_status(t, off, 30, c(c"flushed")), JETS_OK);
        let kept = jets_record_begin_ex(t, root, 50, &rec);
        assert!(kept != 0 && kept != JETS_ID_LEFT_OUT, "{}", last_error());
        assert_eq!(jets_event_ex(t, kept, 51, &event), JETS_OK);
        assert_eq!(jets_record_end(t, kept, 52), JETS_OK);
        assert_eq!(jets_record_end(t, kept, 52), JETS_ERR_RECORD_ENDED, "a real id ends once");
        assert_eq!(jets_record_end(t, root, 200), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    let count = |ty: &str| all.iter().filter(|l| l["type"] == ty).count();
    assert_eq!((count("record"), count("event"), count("record_end")), (2, 1, 2), "{all:#?}");
    let footer = all.last().expect("footer");
    let left_out =
        ["left_out_records", "left_out_events", "left_out_annotations", "left_out_record_ends"]
            .map(|k| footer[k].as_u64().unwrap_or_else(|| panic!("no {k} in {footer}")));
    // Records: 3 begun while off, 2 pushed, 2 left out while on. Events: 4 events and the
    // counter while off, 1 while on. Ends: the 2 pops and the 2 ends given JETS_ID_LEFT_OUT.
    assert_eq!(left_out, [7, 6, 1, 4], "{footer}");
}

/// Found by the `c_api` fuzz target: `jets_domain_set_enabled` indexed its table with `domain - 1`
/// after a check that let domain 0 through (it means "none" to a line) and let any handle through
/// while tracing was off, so 0 (subtraction overflow) and 256 or more (out of bounds) panicked
/// (`JETS_ERR_INTERNAL`), and a never-created handle below 256 was accepted while off.
#[test]
fn domain_set_enabled_refuses_handles_it_never_made_whether_on_or_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = open(&dir.path().join("t.jets")).0;
    // SAFETY: `t` is open until the jets_close at the end of the block; the strings are C-string
    // literals.
    unsafe {
        let d = jets_domain_create(t, c(c"mem"));
        assert_eq!(d, 1, "{}", last_error());
        for on in [true, false] {
            assert_eq!(jets_set_enabled(t, on), JETS_OK);
            for bad in [0, 2, 255, 256, u32::MAX] {
                assert_eq!(
                    jets_domain_set_enabled(t, bad, true),
                    JETS_ERR_INVALID_ARGUMENT,
                    "domain {bad}, tracing {on}: {}",
                    last_error()
                );
            }
            assert_eq!(jets_domain_set_enabled(t, d, on), JETS_OK);
        }
        assert_eq!(jets_close(t), JETS_OK);
    }
}

/// Rule CA-CLK-4: a `clk` of another clock whose trace cycle is 2^64 or more is refused. A cast
/// saturated it to `u64::MAX` (`JETS_CLK_NOW`), so lines were written at that cycle (which
/// CA-CLK-1 keeps out of the C API) and `jets_clock_set` set the trace clock to it.
#[test]
fn a_clk_in_another_clock_past_64_bits_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let p = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
    let mut t = std::ptr::null_mut();
    // SAFETY: `p` and the strings are NUL-terminated; `t` is a writable out pointer, then open
    // until the jets_close at the end of the block; `a` outlives the calls that read it.
    unsafe {
        let meta = c(c"{\"clock_frequency_mhz\":1000}");
        assert_eq!(jets_open(p.as_ptr(), meta, &mut t), JETS_OK, "{}", last_error());
        let slow = jets_clock_create(t, c(c"slow"), 1.0);
        assert_ne!(slow, 0, "{}", last_error());
        let root = jets_record_begin(t, 0, 5, c(c"root"), c(c"Root"), null(), null());
        let a = jets_attrs {
            size: std::mem::size_of::<jets_attrs>() as u32,
            name: jets_intern(c(c"e")),
            record_type: jets_intern(c(c"E")),
            description: 0,
            fields: null(),
            field_count: 0,
            data_json: null(),
            domain: 0,
            clock: slow,
        };
        let far = u64::MAX / 1000 + 1; // 1000 trace cycles each: past 2^64
        assert_eq!(jets_clock_set(t, slow, far), JETS_ERR_INVALID_ARGUMENT);
        assert!(last_error().contains("not a cycle"), "{}", last_error());
        assert_eq!(jets_event_ex(t, root, far, &a), JETS_ERR_INVALID_ARGUMENT);
        assert_eq!(jets_record_begin_ex(t, root, far, &a), 0);
        assert_eq!(jets_last_error_code(), JETS_ERR_INVALID_ARGUMENT);
        assert_eq!(jets_push(t, far, &a), 0);
        assert_eq!(jets_last_error_code(), JETS_ERR_INVALID_ARGUMENT);
        // One that fits still converts (2^63 trace cycles and a little), and the clock set from
        // it is a cycle, not JETS_CLK_NOW.
        let near = (1 << 63) / 1000;
        assert_eq!(jets_event_ex(t, root, near, &a), JETS_OK, "{}", last_error());
        assert_eq!(jets_clock_set(t, slow, near), JETS_OK);
        assert_eq!(jets_event(t, root, JETS_CLK_NOW, c(c"now"), null(), null()), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    let clks: Vec<u64> = all
        .iter()
        .filter(|l| l["type"] == "event")
        .map(|l| l["clk"].as_u64().expect("clk"))
        .collect();
    assert_eq!(clks.len(), 2, "{all:#?}");
    let want = (((1u64 << 63) / 1000) as f64 * 1000.0) as u64;
    assert_eq!(clks, [want, want]);
}

/// CA-CLK-3: another clock converts to the trace's cycles by the header's `clock_frequency_mhz`,
/// which `jets_open` takes as any JSON number: 0 mapped every cycle of the other clock to cycle
/// 0, and a negative rate to nothing real. Such a rate is refused when the clock is made.
#[test]
fn a_clock_needs_a_positive_trace_rate() {
    let dir = tempfile::tempdir().expect("tempdir");
    for rate in ["0", "-5", "1e-320"] {
        let path = dir.path().join(format!("t{rate}.jets"));
        let p = CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
        let meta = CString::new(format!("{{\"clock_frequency_mhz\":{rate}}}")).expect("meta");
        let mut t = std::ptr::null_mut();
        // SAFETY: `p` and the strings are NUL-terminated; `t` is a writable out pointer, then
        // open until the jets_close at the end of the block.
        unsafe {
            assert_eq!(jets_open(p.as_ptr(), meta.as_ptr(), &mut t), JETS_OK, "{}", last_error());
            let clock = jets_clock_create(t, c(c"slow"), 1.0);
            if rate == "1e-320" {
                // Positive, if tiny: a rate, and a clock of it.
                assert_ne!(clock, 0, "{}", last_error());
            } else {
                assert_eq!(clock, 0, "rate {rate}");
                assert_eq!(jets_last_error_code(), JETS_ERR_INVALID_ARGUMENT);
                assert!(last_error().contains("not a positive frequency"), "{}", last_error());
            }
            assert_eq!(jets_close(t), JETS_OK);
        }
    }
}

#[test]
fn pretty_printed_data_json_is_written_on_one_line() {
    // JSON a C program's library pretty-printed (WR-DATA-3): each line break in it split the
    // trace's line in several before, and the file was no longer JSON Lines.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jets");
    let t = open(&path).0;
    // SAFETY: `t` is open until the jets_close below; every string is a NUL-terminated literal.
    unsafe {
        let data = c(c"{\n  \"a\": 1,\r\n  \"b\": [1,\n 2],\n  \"s\": \"x\\ny\"\n}\n");
        let root = jets_record_begin(t, 0, 0, c(c"core0"), c(c"Core"), null(), data);
        assert_ne!(root, 0, "{}", last_error());
        assert_eq!(jets_event(t, root, 1, c(c"E"), null(), data), JETS_OK);
        assert_eq!(jets_annotation(t, root, c(c"A"), null(), c(c"[\n true\n]")), JETS_OK);
        assert_eq!(jets_record_end(t, root, 2), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let all = lines(&path);
    assert_eq!(all.len(), 6, "header, record, event, annotation, end, footer");
    let want = serde_json::json!({"a": 1, "b": [1, 2], "s": "x\ny"});
    assert_eq!(all[1]["data"], want);
    assert_eq!(all[2]["data"], want);
    assert_eq!(all[3]["data"], serde_json::json!([true]));
}
