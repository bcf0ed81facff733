//! What to capture: [`Capture`], built in code or parsed from `JETS_CAPTURE`.

use std::fmt;
use std::ops::Range;

/// The environment variable read when a trace is opened (see [`Capture::parse`]).
pub const ENV: &str = "JETS_CAPTURE";

/// How much a flight recorder keeps in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorder {
    /// The lines of the last N cycles (by `clk`, counted back from the largest seen).
    Cycles(u64),
    /// At most N bytes of encoded lines (ancestors kept for them are not counted).
    Bytes(u64),
}

/// What makes a flight recorder write what it holds, besides `dump`, panics, the signals that
/// end the process, and close.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// An event with this name.
    Event(String),
    /// An event whose `severity` hint is `error`.
    Error,
    /// The process receives this signal (`trigger=SIGUSR1`, `trigger=SIGUSR2`; Unix): `kill
    /// -USR1 PID` writes what the recorder holds, and the run goes on (CAP-REC-4).
    Signal(DumpSignal),
}

/// A signal that dumps a flight recorder without ending the process ([`Trigger::Signal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpSignal {
    /// `SIGUSR1`.
    Usr1,
    /// `SIGUSR2`.
    Usr2,
}

/// A capture setting: which lines of a run reach the file.
///
/// Every part is optional and all given parts must hold. [`Capture::default`] captures
/// everything. Spelled as text (the `JETS_CAPTURE` grammar), clauses are separated by `;`:
///
/// ```
/// use jets::capture::Capture;
/// let c: Capture = "clk=1000..2000; types=Instruction; sample=Instruction:10".parse().unwrap();
/// assert_eq!(c.to_string(), "clk=1000..2000;types=Instruction;sample=Instruction:10");
/// let e = "clk=9..3".parse::<Capture>().unwrap_err();
/// assert_eq!(e.to_string(), "JETS_CAPTURE clause `clk=9..3`: the window is empty (9 is not below 3)");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// Start with capture off (`off`); [`crate::Trace::capture_on`] turns it on.
    pub off: bool,
    /// Only lines with `clk` in this window (`clk=A..B`, B excluded).
    pub window: Option<Range<u64>>,
    /// The window again every this many cycles (`every=P`): `[A + kP, B + kP)` for every k, a
    /// periodic sample of the run as SMARTS-style sampled simulation takes one (CAP-WIN-2).
    /// Needs a window shorter than P.
    pub every: Option<u64>,
    /// Only lines emitted while a region of interest is open (`roi`).
    pub roi: bool,
    /// Only records of these record_types, and the lines on them (`types=`).
    pub types: Option<Vec<String>>,
    /// Only events with these names (`events=`).
    pub events: Option<Vec<String>>,
    /// Only records with these `unit_id` hints (or inside such a record), and the lines on them
    /// (`units=`).
    pub units: Option<Vec<u64>>,
    /// Keep 1 of every N records of a record_type, with their subtrees (`sample=TYPE:N`).
    pub samples: Vec<(String, u64)>,
    /// Keep recent lines in memory and write them only on a dump (`recorder=`).
    pub recorder: Option<Recorder>,
    /// What dumps the recorder (`trigger=`).
    pub triggers: Vec<Trigger>,
    /// After a trigger by a line ([`Trigger::Event`], [`Trigger::Error`]), go on recording for
    /// this many cycles before the dump (`post=CYCLES`), as a logic analyzer places its trigger
    /// in its buffer: the dump then holds what led to the trigger and what followed it (a
    /// squash, a recovery), with the trigger line in it (CAP-REC-5). Needs such a trigger, and
    /// fewer cycles than a `recorder=CYCLES` window.
    pub post_trigger: Option<u64>,
    /// At most this many dumps by triggers by a line (`dumps=N`): then such triggers are
    /// recorded like any line, and the recorder is written again only by `dump()`, a signal,
    /// a failure or the close (CAP-REC-6). `dumps=1` keeps the window of the first failure of
    /// a run whose failures repeat, as a logic analyzer's single-shot mode does.
    pub trigger_dumps: Option<u64>,
    /// Count the lines the rest of the setting selects instead of writing them (`count`): every
    /// line is still made and handed to the writer thread, which counts it (held ancestors it
    /// would write included) and drops it. The file holds the header and a footer whose
    /// `counted_*` members give the counts: how much a setting would write, and what making and
    /// handing over the lines costs apart from keeping and writing them (CAP-COUNT-1). With a
    /// flight recorder, what its dumps would write is counted.
    pub count: bool,
    /// Stop capturing for good once the file holds this many bytes of lines (`limit=SIZE`,
    /// SIZE in `B`, `KiB`, `MiB` or `GiB`), as Perfetto's `max_file_size_bytes` stops a trace:
    /// a first full run of a simulator that would write tens of gigabytes fills a file of known
    /// size instead of the disk. The file ends with the batch of lines that reaches SIZE (at
    /// most [`crate::WRITE_BATCH_BYTES`] past it), the lines after it are left out and counted,
    /// capture turns off as [`crate::Trace::capture_off`] turns it off, and
    /// [`crate::Trace::capture_on`] no longer turns it on; the footer says the limit was reached
    /// (CAP-LIM-1). Counted before compression. Not with a flight recorder (its dumps are its
    /// file's bound) nor `count` (which writes no line).
    pub limit: Option<u64>,
}

/// A `JETS_CAPTURE` text that cannot be used: names the clause and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("JETS_CAPTURE clause `{clause}`: {reason}")]
pub struct CaptureError {
    /// The clause as written.
    pub clause: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Capture {
    /// Everything (the default).
    pub fn full() -> Capture {
        Capture::default()
    }

    /// True when nothing is filtered, sampled or held back (capture may still be switched off,
    /// [`Capture::count`] may still count lines rather than write them, and
    /// [`Capture::limit`] may still end the file early).
    pub fn is_full(&self) -> bool {
        let Capture {
            off: _,
            window,
            every: _,
            roi,
            types,
            events,
            units,
            samples,
            recorder,
            triggers,
            post_trigger: _,
            trigger_dumps: _,
            count: _,
            limit: _,
        } = self;
        window.is_none()
            && !roi
            && types.is_none()
            && events.is_none()
            && units.is_none()
            && samples.is_empty()
            && recorder.is_none()
            && triggers.is_empty()
    }

    /// Reads [`ENV`]: `Ok(None)` when it is unset or blank.
    pub fn from_env() -> Result<Option<Capture>, CaptureError> {
        match std::env::var(ENV) {
            Ok(text) if !text.trim().is_empty() => text.parse().map(Some),
            Ok(_) => Ok(None),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(CaptureError {
                clause: "(whole value)".into(),
                reason: "the value is not valid UTF-8".into(),
            }),
        }
    }

    /// Parses the `JETS_CAPTURE` grammar: `full` (everything, the default; alone), or clauses
    /// separated by `;`, each one of `off`,
    /// `clk=A..B`, `every=P`, `roi`, `types=T1,T2`, `events=E1,E2`, `units=0,3`, `sample=TYPE:N`,
    /// `recorder=CYCLES`, `recorder=NMiB`, `trigger=EVENT_NAME`, `trigger=error`,
    /// `trigger=SIGUSR1`, `trigger=SIGUSR2`, `post=CYCLES`, `dumps=N`, `count`, `limit=SIZE`.
    pub fn parse(text: &str) -> Result<Capture, CaptureError> {
        let mut c = Capture::default();
        let clauses = text.split(';').map(str::trim).filter(|c| !c.is_empty());
        // `full`, the spelling of the default (the footer writes it), reads back as it, and
        // only alone: beside another clause it would say two things at once.
        let several = clauses.clone().nth(1).is_some();
        for clause in clauses {
            let fail = |reason| CaptureError { clause: clause.into(), reason };
            if clause == "full" {
                if several {
                    return Err(fail("`full` (everything) stands alone".into()));
                }
                continue;
            }
            c.clause(clause).map_err(fail)?;
        }
        c.check()?;
        Ok(c)
    }

    /// Checks what no single clause can: that a trigger has a flight recorder to dump, that an
    /// `every=` period is longer than its `clk=` window, that `post=` and `dumps=` have a
    /// trigger by a line to apply to, and that a delayed dump comes while the trigger line is
    /// still in a `recorder=CYCLES` window (CAP-REC-3, CAP-WIN-2, CAP-REC-5, CAP-REC-6); and,
    /// for a setting made in code, the values the grammar refuses: an empty window or list, an
    /// empty name, a 1-of-0 sample or one of a type sampled twice, a recorder of 0 (CAP-ENV-1).
    /// [`Capture::parse`] calls it, and so does opening a trace with a setting made in code.
    ///
    /// ```
    /// use jets::capture::{Capture, Recorder, Trigger};
    /// let c = Capture {
    ///     recorder: Some(Recorder::Cycles(1000)),
    ///     triggers: vec![Trigger::Error],
    ///     post_trigger: Some(1000),
    ///     ..Capture::default()
    /// };
    /// assert_eq!(
    ///     c.check().unwrap_err().to_string(),
    ///     "JETS_CAPTURE clause `post=1000`: the post-trigger cycles must be fewer than the \
    ///      recorder's window (1000 cycles), or the trigger line leaves it before the dump"
    /// );
    /// ```
    pub fn check(&self) -> Result<(), CaptureError> {
        // A clause is named as the footer spells it: by a setting that holds it alone.
        let named =
            |alone: Capture| move |reason| CaptureError { clause: alone.to_string(), reason };
        let none = Capture::default;
        // The values each clause's grammar refuses, for a setting made in code: first, since
        // the checks below compute with them.
        if let Some(w) = &self.window {
            check_window(w).map_err(named(Capture { window: Some(w.clone()), ..none() }))?;
        }
        if let Some(t) = &self.types {
            check_names(t, "record_type")
                .map_err(named(Capture { types: Some(t.clone()), ..none() }))?;
        }
        if let Some(e) = &self.events {
            check_names(e, "event name")
                .map_err(named(Capture { events: Some(e.clone()), ..none() }))?;
        }
        if self.units.as_ref().is_some_and(Vec::is_empty) {
            let alone = Capture { units: Some(vec![]), ..none() };
            return Err(named(alone)("the list of unit_ids is empty".into()));
        }
        for (i, sample) in self.samples.iter().enumerate() {
            let (ty, n) = sample;
            check_sample(&self.samples[..i], ty, *n)
                .map_err(named(Capture { samples: vec![sample.clone()], ..none() }))?;
        }
        if let Some(r) = self.recorder {
            check_recorder(&r).map_err(named(Capture { recorder: Some(r), ..none() }))?;
        }
        if self.recorder.is_none() && !self.triggers.is_empty() {
            let alone = Capture { triggers: self.triggers.clone(), ..none() };
            let reason = "a trigger dumps the flight recorder: add a `recorder=` clause";
            return Err(named(alone)(reason.into()));
        }
        if let Some(p) = self.every {
            self.check_every(p).map_err(named(Capture { every: Some(p), ..none() }))?;
        }
        if let Some(p) = self.post_trigger {
            self.check_post(p).map_err(named(Capture { post_trigger: Some(p), ..none() }))?;
        }
        if let Some(n) = self.trigger_dumps {
            self.check_dumps(n).map_err(named(Capture { trigger_dumps: Some(n), ..none() }))?;
        }
        if let Some(n) = self.limit {
            self.check_limit(n).map_err(named(Capture { limit: Some(n), ..none() }))?;
        }
        Ok(())
    }

    fn check_limit(&self, bytes: u64) -> Result<(), String> {
        if bytes == 0 {
            return Err("the size limit must be at least 1 byte".into());
        }
        if self.recorder.is_some() {
            return Err("a flight recorder's file is bounded by its dumps: `limit=` stops a \
                        streamed trace, drop one of `limit=` and `recorder=`"
                .into());
        }
        if self.count {
            return Err("`count` writes no line, so no size limit is reached: drop `limit=`".into());
        }
        Ok(())
    }

    fn check_every(&self, period: u64) -> Result<(), String> {
        let Some(w) = &self.window else {
            return Err("`every=` repeats a window: add a `clk=A..B` clause".into());
        };
        if period <= w.end - w.start {
            return Err(format!(
                "the period must be longer than the window ({} cycles), or the windows would \
                 touch",
                w.end - w.start
            ));
        }
        Ok(())
    }

    fn check_post(&self, post: u64) -> Result<(), String> {
        if post == 0 {
            return Err("post-trigger cycles must be at least 1 (without `post=`, a trigger \
                        dumps at once)"
                .into());
        }
        self.needs_line_trigger("post", "delays the dump of")?;
        match self.recorder {
            Some(Recorder::Cycles(window)) if post >= window => Err(format!(
                "the post-trigger cycles must be fewer than the recorder's window ({window} \
                 cycles), or the trigger line leaves it before the dump"
            )),
            _ => Ok(()),
        }
    }

    fn check_dumps(&self, n: u64) -> Result<(), String> {
        if n == 0 {
            return Err("dumps= must allow at least 1 dump (without a trigger, the recorder is \
                        written by dump() and at close)"
                .into());
        }
        self.needs_line_trigger("dumps", "limits the dumps of")
    }

    /// `key=` (which `what` a trigger) needs a trigger by an event: by name or `error`.
    fn needs_line_trigger(&self, key: &str, what: &str) -> Result<(), String> {
        if self.triggers.iter().any(|t| !matches!(t, Trigger::Signal(_))) {
            return Ok(());
        }
        Err(format!(
            "`{key}=` {what} a trigger by a line: add a `trigger=EVENT_NAME` or `trigger=error` \
             clause"
        ))
    }

    fn clause<'a>(&mut self, clause: &'a str) -> Result<(), String> {
        let (key, value) = match clause.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (clause, None),
        };
        let need = |v: Option<&'a str>| -> Result<&'a str, String> {
            match v {
                Some("") | None => Err(format!("`{key}` needs a value after `=`")),
                Some(v) => Ok(v),
            }
        };
        match key {
            "off" | "roi" | "count" => {
                if value.is_some() {
                    return Err(format!("`{key}` takes no value"));
                }
                match key {
                    "off" => self.off = true,
                    "roi" => self.roi = true,
                    _ => self.count = true,
                }
            }
            "clk" => once(&mut self.window, key, || window(need(value)?))?,
            "every" => once(&mut self.every, key, || number(need(value)?, "period"))?,
            "types" => once(&mut self.types, key, || names(need(value)?, "record_type"))?,
            "events" => once(&mut self.events, key, || names(need(value)?, "event name"))?,
            "units" => {
                once(&mut self.units, key, || {
                    need(value)?.split(',').map(|u| number(u.trim(), "unit_id")).collect()
                })?;
            }
            "sample" => {
                let v = need(value)?;
                let Some((ty, n)) = v.rsplit_once(':') else {
                    return Err(
                        "expected `sample=TYPE:N` (keep 1 of every N records of TYPE)".into()
                    );
                };
                let ty = ty.trim();
                let n = number(n.trim(), "N")?;
                check_sample(&self.samples, ty, n)?;
                self.samples.push((ty.to_owned(), n));
            }
            "recorder" => once(&mut self.recorder, key, || recorder(need(value)?))?,
            "trigger" => {
                let trigger = match need(value)? {
                    "error" => Trigger::Error,
                    "SIGUSR1" => Trigger::Signal(DumpSignal::Usr1),
                    "SIGUSR2" => Trigger::Signal(DumpSignal::Usr2),
                    v => Trigger::Event(v.into()),
                };
                if matches!(trigger, Trigger::Signal(_)) && !cfg!(unix) {
                    return Err("signals exist on Unix only".into());
                }
                self.triggers.push(trigger);
            }
            "post" => {
                once(&mut self.post_trigger, key, || {
                    number(need(value)?, "post-trigger cycle count")
                })?;
            }
            "dumps" => once(&mut self.trigger_dumps, key, || number(need(value)?, "dump count"))?,
            "limit" => once(&mut self.limit, key, || size(need(value)?))?,
            _ => {
                return Err(format!(
                    "unknown clause `{key}` (expected full, off, clk=A..B, every=P, roi, types=, \
                     events=, units=, sample=TYPE:N, recorder=CYCLES|NMiB, \
                     trigger=EVENT|error|SIGUSR1|SIGUSR2, post=CYCLES, dumps=N, count, \
                     limit=SIZE)"
                ))
            }
        }
        Ok(())
    }
}

/// Sets a clause that may be given once to what `value` parses (refused before parsing when it
/// was given already).
fn once<T>(
    slot: &mut Option<T>,
    key: &str,
    value: impl FnOnce() -> Result<T, String>,
) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("`{key}` is given twice"));
    }
    *slot = Some(value()?);
    Ok(())
}

fn number(text: &str, what: &str) -> Result<u64, String> {
    text.replace('_', "")
        .parse::<u64>()
        .map_err(|_| format!("{what} `{text}` is not an unsigned integer"))
}

fn window(v: &str) -> Result<Range<u64>, String> {
    let Some((a, b)) = v.split_once("..") else {
        return Err(format!("expected `clk=A..B` (cycles A included, B excluded), got `{v}`"));
    };
    let a = number(a.trim(), "start cycle")?;
    let b = number(b.trim(), "end cycle")?;
    check_window(&(a..b))?;
    Ok(a..b)
}

/// A window holds at least one cycle.
fn check_window(w: &Range<u64>) -> Result<(), String> {
    if w.start >= w.end {
        return Err(format!("the window is empty ({} is not below {})", w.start, w.end));
    }
    Ok(())
}

/// A 1-of-N sample names a record_type not sampled `before`, and has N of at least 1.
fn check_sample(before: &[(String, u64)], ty: &str, n: u64) -> Result<(), String> {
    if ty.is_empty() {
        return Err("the record_type before `:` is empty".into());
    }
    if n == 0 {
        return Err("N must be at least 1 (1 keeps every record)".into());
    }
    if before.iter().any(|(t, _)| t == ty) {
        return Err(format!("record_type `{ty}` is sampled twice"));
    }
    Ok(())
}

/// A list of names has names, none of them empty.
fn check_names(names: &[String], what: &str) -> Result<(), String> {
    if names.is_empty() {
        return Err(format!("the list of {what}s is empty"));
    }
    if names.iter().any(String::is_empty) {
        return Err(format!("an empty {what} in the list"));
    }
    Ok(())
}

/// A recorder keeps something.
fn check_recorder(r: &Recorder) -> Result<(), String> {
    if matches!(r, Recorder::Cycles(0) | Recorder::Bytes(0)) {
        return Err("a recorder must keep at least 1 cycle or 1 MiB".into());
    }
    Ok(())
}

fn names(v: &str, what: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = v.split(',').map(|s| s.trim().to_owned()).collect();
    check_names(&names, what)?;
    Ok(names)
}

fn recorder(v: &str) -> Result<Recorder, String> {
    let lower = v.to_ascii_lowercase();
    let r = if let Some(n) = lower.strip_suffix("mib") {
        let n = number(n.trim(), "size in MiB")?;
        Recorder::Bytes(n.checked_mul(1 << 20).ok_or_else(|| format!("{n} MiB is too large"))?)
    } else {
        if lower.ends_with('b') || lower.ends_with("mb") {
            return Err(format!("size `{v}`: write the size in MiB, e.g. `recorder=64MiB`"));
        }
        Recorder::Cycles(number(v, "cycle count")?)
    };
    check_recorder(&r)?;
    Ok(r)
}

/// The binary units a `limit=` size is written in, largest first.
const UNITS: [(&str, u64); 4] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];

/// A `limit=` size: a whole number of bytes, KiB, MiB or GiB. Decimal units (kB, MB, GB) and a
/// bare number are refused: 1 MB and 1 MiB differ by 5 %, and a size limit that is off by that
/// silently is no limit.
fn size(v: &str) -> Result<u64, String> {
    let lower = v.to_ascii_lowercase();
    let unit = UNITS.iter().find_map(|&(unit, scale)| {
        lower.strip_suffix(unit.to_ascii_lowercase().as_str()).map(|digits| (digits, scale))
    });
    let Some((digits, scale)) = unit else {
        return Err(format!("size `{v}`: give its unit, e.g. `limit=2GiB` (B, KiB, MiB or GiB)"));
    };
    let digits = digits.trim();
    if digits.ends_with(['k', 'm', 'g']) {
        return Err(format!(
            "size `{v}`: decimal units are not taken, write KiB, MiB or GiB (1 MiB = 1,048,576 \
             bytes), e.g. `limit=2GiB`"
        ));
    }
    let n = number(digits, "size")?;
    n.checked_mul(scale).ok_or_else(|| format!("size `{v}` is too large"))
}

/// A size in the largest unit that holds it whole (`2GiB`, `1536MiB`, `1000B`).
fn spell_size(bytes: u64) -> String {
    let (unit, scale) = UNITS.into_iter().find(|(_, s)| bytes % s == 0).unwrap_or(("B", 1));
    format!("{}{unit}", bytes / scale)
}

impl std::str::FromStr for Capture {
    type Err = CaptureError;
    fn from_str(s: &str) -> Result<Capture, CaptureError> {
        Capture::parse(s)
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Event(e) => f.write_str(e),
            Trigger::Error => f.write_str("error"),
            Trigger::Signal(DumpSignal::Usr1) => f.write_str("SIGUSR1"),
            Trigger::Signal(DumpSignal::Usr2) => f.write_str("SIGUSR2"),
        }
    }
}

/// The value of a `recorder=` clause: cycles, or whole MiB.
impl fmt::Display for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recorder::Cycles(n) => write!(f, "{n}"),
            Recorder::Bytes(n) => write!(f, "{}MiB", n >> 20),
        }
    }
}

/// The normalized `JETS_CAPTURE` spelling (`full` when nothing is filtered), as written in the
/// footer's `capture` member.
impl fmt::Display for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.off {
            parts.push("off".to_owned());
        }
        if let Some(w) = &self.window {
            parts.push(format!("clk={}..{}", w.start, w.end));
        }
        if let Some(p) = self.every {
            parts.push(format!("every={p}"));
        }
        if self.roi {
            parts.push("roi".into());
        }
        if let Some(t) = &self.types {
            parts.push(format!("types={}", t.join(",")));
        }
        if let Some(e) = &self.events {
            parts.push(format!("events={}", e.join(",")));
        }
        if let Some(u) = &self.units {
            let u: Vec<String> = u.iter().map(u64::to_string).collect();
            parts.push(format!("units={}", u.join(",")));
        }
        for (t, n) in &self.samples {
            parts.push(format!("sample={t}:{n}"));
        }
        if let Some(r) = &self.recorder {
            parts.push(format!("recorder={r}"));
        }
        for t in &self.triggers {
            parts.push(format!("trigger={t}"));
        }
        if let Some(n) = self.post_trigger {
            parts.push(format!("post={n}"));
        }
        if let Some(n) = self.trigger_dumps {
            parts.push(format!("dumps={n}"));
        }
        if self.count {
            parts.push("count".into());
        }
        if let Some(n) = self.limit {
            parts.push(format!("limit={}", spell_size(n)));
        }
        if parts.is_empty() {
            return f.write_str("full");
        }
        f.write_str(&parts.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Capture::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn every_clause_parses_and_prints_back() {
        let text = "off;clk=10..20;every=1000;roi;types=Instruction,Stall;events=Squash;\
                    units=0,3;sample=Instruction:10;recorder=100000;trigger=Squash;\
                    trigger=error;post=2000;dumps=3";
        let c = Capture::parse(text).unwrap();
        assert_eq!(c.window, Some(10..20));
        assert_eq!(c.every, Some(1000));
        assert_eq!(c.units, Some(vec![0, 3]));
        assert_eq!(c.samples, vec![("Instruction".to_owned(), 10)]);
        assert_eq!(c.recorder, Some(Recorder::Cycles(100_000)));
        assert_eq!(c.triggers, vec![Trigger::Event("Squash".into()), Trigger::Error]);
        assert_eq!(c.post_trigger, Some(2000));
        assert_eq!(c.trigger_dumps, Some(3));
        assert_eq!(c.to_string(), text);
        assert_eq!(Capture::parse(&c.to_string()).unwrap(), c);
        assert_eq!(
            Capture::parse(" recorder = 64MiB ; ").unwrap().recorder,
            Some(Recorder::Bytes(64 << 20))
        );
        assert_eq!(Capture::parse("").unwrap().to_string(), "full");
        let counting = Capture::parse("count; clk=5..9").unwrap();
        assert!(counting.count && counting.window == Some(5..9));
        assert_eq!(counting.to_string(), "clk=5..9;count");
        assert!(Capture::parse("clk=1_000..2_000").unwrap().window == Some(1000..2000));
        let signals = Capture::parse("recorder=10;trigger=SIGUSR1;trigger=SIGUSR2").unwrap();
        assert_eq!(
            signals.triggers,
            vec![Trigger::Signal(DumpSignal::Usr1), Trigger::Signal(DumpSignal::Usr2)]
        );
        assert_eq!(signals.to_string(), "recorder=10;trigger=SIGUSR1;trigger=SIGUSR2");
        // The default is spelled `full` (so the footer says it), and reads back as the default.
        assert_eq!(Capture::default().to_string(), "full");
        assert_eq!(Capture::parse(" full ;").unwrap(), Capture::default());
        // A size-bounded recorder takes any delay: its window is bytes, not cycles.
        let sized = Capture::parse("recorder=64MiB;trigger=Fault;post=5000000").unwrap();
        assert_eq!(sized.to_string(), "recorder=64MiB;trigger=Fault;post=5000000");
        // A size limit in any binary unit, spelled back in the largest that holds it whole.
        for (text, bytes, spelled) in [
            ("limit=2GiB", 2 << 30, "limit=2GiB"),
            ("limit=1536 mib", 1536 << 20, "limit=1536MiB"),
            ("limit=64KiB", 64 << 10, "limit=64KiB"),
            ("limit=1_000B", 1000, "limit=1000B"),
            ("limit=2048KiB", 2 << 20, "limit=2MiB"),
        ] {
            let c = Capture::parse(&format!("clk=0..9;{text}")).unwrap();
            assert_eq!(c.limit, Some(bytes), "{text}");
            assert_eq!(c.to_string(), format!("clk=0..9;{spelled}"));
            assert_eq!(Capture::parse(&c.to_string()).unwrap(), c);
            // A limit filters nothing: until it is reached, the file is the whole run.
            assert!(Capture { limit: Some(bytes), ..Capture::default() }.is_full());
        }
    }

    /// Each bad clause has its own message, naming the clause.
    #[test]
    fn bad_clauses_name_the_clause_and_the_problem() {
        let cases = [
            ("clk=5", "JETS_CAPTURE clause `clk=5`: expected `clk=A..B` (cycles A included, B excluded), got `5`"),
            ("clk=x..9", "JETS_CAPTURE clause `clk=x..9`: start cycle `x` is not an unsigned integer"),
            ("clk=1..-2", "JETS_CAPTURE clause `clk=1..-2`: end cycle `-2` is not an unsigned integer"),
            ("clk=9..3", "JETS_CAPTURE clause `clk=9..3`: the window is empty (9 is not below 3)"),
            ("clk=1..2;clk=3..4", "JETS_CAPTURE clause `clk=3..4`: `clk` is given twice"),
            ("clk", "JETS_CAPTURE clause `clk`: `clk` needs a value after `=`"),
            ("roi=1", "JETS_CAPTURE clause `roi=1`: `roi` takes no value"),
            ("off=yes", "JETS_CAPTURE clause `off=yes`: `off` takes no value"),
            ("types=A,,B", "JETS_CAPTURE clause `types=A,,B`: an empty record_type in the list"),
            ("events=", "JETS_CAPTURE clause `events=`: `events` needs a value after `=`"),
            ("units=0,x", "JETS_CAPTURE clause `units=0,x`: unit_id `x` is not an unsigned integer"),
            ("sample=Instruction", "JETS_CAPTURE clause `sample=Instruction`: expected `sample=TYPE:N` (keep 1 of every N records of TYPE)"),
            ("sample=:4", "JETS_CAPTURE clause `sample=:4`: the record_type before `:` is empty"),
            ("sample=I:0", "JETS_CAPTURE clause `sample=I:0`: N must be at least 1 (1 keeps every record)"),
            ("sample=I:2;sample=I:3", "JETS_CAPTURE clause `sample=I:3`: record_type `I` is sampled twice"),
            ("recorder=10MB", "JETS_CAPTURE clause `recorder=10MB`: size `10MB`: write the size in MiB, e.g. `recorder=64MiB`"),
            ("recorder=lots", "JETS_CAPTURE clause `recorder=lots`: cycle count `lots` is not an unsigned integer"),
            ("recorder=0", "JETS_CAPTURE clause `recorder=0`: a recorder must keep at least 1 cycle or 1 MiB"),
            ("trigger=error", "JETS_CAPTURE clause `trigger=error`: a trigger dumps the flight recorder: add a `recorder=` clause"),
            ("window=1..2", "JETS_CAPTURE clause `window=1..2`: unknown clause `window` (expected full, off, clk=A..B, every=P, roi, types=, events=, units=, sample=TYPE:N, recorder=CYCLES|NMiB, trigger=EVENT|error|SIGUSR1|SIGUSR2, post=CYCLES, dumps=N, count, limit=SIZE)"),
            ("count=1", "JETS_CAPTURE clause `count=1`: `count` takes no value"),
            ("full;clk=1..2", "JETS_CAPTURE clause `full`: `full` (everything) stands alone"),
            ("roi; full", "JETS_CAPTURE clause `full`: `full` (everything) stands alone"),
            ("every=1000", "JETS_CAPTURE clause `every=1000`: `every=` repeats a window: add a `clk=A..B` clause"),
            ("clk=0..100;every=0", "JETS_CAPTURE clause `every=0`: the period must be longer than the window (100 cycles), or the windows would touch"),
            ("clk=0..100;every=100", "JETS_CAPTURE clause `every=100`: the period must be longer than the window (100 cycles), or the windows would touch"),
            ("clk=0..100;every=1k", "JETS_CAPTURE clause `every=1k`: period `1k` is not an unsigned integer"),
            ("clk=0..100;every=500;every=600", "JETS_CAPTURE clause `every=600`: `every` is given twice"),
            ("recorder=50;post=10", "JETS_CAPTURE clause `post=10`: `post=` delays the dump of a trigger by a line: add a `trigger=EVENT_NAME` or `trigger=error` clause"),
            ("recorder=50;trigger=SIGUSR1;post=10", "JETS_CAPTURE clause `post=10`: `post=` delays the dump of a trigger by a line: add a `trigger=EVENT_NAME` or `trigger=error` clause"),
            ("recorder=50;trigger=error;post=0", "JETS_CAPTURE clause `post=0`: post-trigger cycles must be at least 1 (without `post=`, a trigger dumps at once)"),
            ("recorder=50;trigger=error;post=50", "JETS_CAPTURE clause `post=50`: the post-trigger cycles must be fewer than the recorder's window (50 cycles), or the trigger line leaves it before the dump"),
            ("recorder=50;trigger=error;post=soon", "JETS_CAPTURE clause `post=soon`: post-trigger cycle count `soon` is not an unsigned integer"),
            ("recorder=50;trigger=error;post=5;post=6", "JETS_CAPTURE clause `post=6`: `post` is given twice"),
            ("recorder=50;dumps=1", "JETS_CAPTURE clause `dumps=1`: `dumps=` limits the dumps of a trigger by a line: add a `trigger=EVENT_NAME` or `trigger=error` clause"),
            ("recorder=50;trigger=error;dumps=0", "JETS_CAPTURE clause `dumps=0`: dumps= must allow at least 1 dump (without a trigger, the recorder is written by dump() and at close)"),
            ("recorder=50;trigger=error;dumps=one", "JETS_CAPTURE clause `dumps=one`: dump count `one` is not an unsigned integer"),
            ("recorder=50;trigger=error;dumps=1;dumps=2", "JETS_CAPTURE clause `dumps=2`: `dumps` is given twice"),
            ("limit=4096", "JETS_CAPTURE clause `limit=4096`: size `4096`: give its unit, e.g. `limit=2GiB` (B, KiB, MiB or GiB)"),
            ("limit=2GB", "JETS_CAPTURE clause `limit=2GB`: size `2GB`: decimal units are not taken, write KiB, MiB or GiB (1 MiB = 1,048,576 bytes), e.g. `limit=2GiB`"),
            ("limit=lotsMiB", "JETS_CAPTURE clause `limit=lotsMiB`: size `lots` is not an unsigned integer"),
            ("limit=0GiB", "JETS_CAPTURE clause `limit=0GiB`: the size limit must be at least 1 byte"),
            ("limit=20000000000GiB", "JETS_CAPTURE clause `limit=20000000000GiB`: size `20000000000GiB` is too large"),
            ("limit=1GiB;limit=2GiB", "JETS_CAPTURE clause `limit=2GiB`: `limit` is given twice"),
            ("recorder=50;limit=1GiB", "JETS_CAPTURE clause `limit=1GiB`: a flight recorder's file is bounded by its dumps: `limit=` stops a streamed trace, drop one of `limit=` and `recorder=`"),
            ("count;limit=1GiB", "JETS_CAPTURE clause `limit=1GiB`: `count` writes no line, so no size limit is reached: drop `limit=`"),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "for {text:?}");
        }
    }
}
