/*
 * jets.hpp: a C++17 RAII wrapper over libjets (jets.h).
 *
 *   jets::trace t("run.jets", R"({"hardware_model":"Tiny5","clock_frequency_mhz":1000})");
 *   const jets::str decode("Decode"), pc("pc"), op("op");
 *   {
 *       jets::record core = t.root("core0", "Core", 0);
 *       core.event(decode, 5, {jets::field(pc, 0x1000u), jets::field(op, "addi")});
 *       t.set_clock(9);
 *   }                        // core ends itself here, at the trace clock (cycle 9)
 *   t.close();               // footer; throws jets::error if writing failed
 *
 * Failures throw jets::error (code + jets_last_error() text). Exceptions are thrown only from
 * this header's C++ code, after the C call has returned: none ever crosses the C boundary, and
 * destructors never throw. Records share their trace's handle: a record still alive when its
 * trace is closed (or destroyed) does nothing when it goes out of scope, instead of touching a
 * freed trace. Every class is as thread-safe as the C API: share a record by reference and emit
 * on it from several threads; close the trace only when no other thread uses it.
 */
#ifndef JETS_HPP
#define JETS_HPP

#if __cplusplus < 201703L && (!defined(_MSVC_LANG) || _MSVC_LANG < 201703L)
#error "jets.hpp needs C++17 or later: compile with -std=c++17 (or /std:c++17); from older C++ use the C API in jets.h"
#endif

#include "jets.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace jets {

/** A failed call: its JETS_ERR_* code and the library's message. */
class error : public std::runtime_error {
public:
    error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
    /** The JETS_ERR_* code. */
    int code() const noexcept { return code_; }

private:
    int code_;
};

namespace detail {
/** The C trace shared by a trace and its records; `t` becomes NULL when the trace is closed. */
struct handle {
    jets_trace *t = nullptr;
};
using shared = std::shared_ptr<handle>;

inline void check(int rc) {
    if (rc != JETS_OK) throw error(rc, jets_last_error());
}
inline jets_id check_id(jets_id id) {
    if (id == 0) throw error(jets_last_error_code(), jets_last_error());
    return id;
}
}  // namespace detail

/** An interned string: register a name once, emit it by handle in hot loops. */
class str {
public:
    explicit str(const char *text) : h_(jets_intern(text)) {
        if (h_ == 0) throw error(jets_last_error_code(), jets_last_error());
    }
    explicit str(const std::string &text) : str(text.c_str()) {}
    jets_str handle() const noexcept { return h_; }

private:
    jets_str h_;
};

/**
 * A typed `data` field, made by jets::field() from an integer, a floating-point number, a bool,
 * an enum (its underlying integer), an interned jets::str, or text (const char *, std::string,
 * std::string_view: copied by the call, no interning, no JSON escaping). Each value keeps its
 * type: a string literal is text, never a bool, and any other pointer does not compile.
 */
class field_value {
public:
    /** A field made by the C helpers (jets_field_u64() and friends). */
    explicit field_value(jets_field f) noexcept : f_(f) {}
    /** Text owned by this object (for views and strings that may not outlive the call). */
    field_value(jets_str key, std::string text) : f_(jets_field_text(key, nullptr)),
                                                  text_(std::move(text)), owned_(true) {}
    /** The C field; text points into this object, valid while it lives. */
    jets_field get() const noexcept {
        jets_field f = f_;
        if (owned_) f.value.text = text_.c_str();
        return f;
    }

private:
    jets_field f_;
    std::string text_;
    bool owned_ = false;
};

/** A number, bool or enum field; the C++ type picks the JETS type. */
template <typename T>
inline field_value field(const str &key, T v) {
    static_assert(!std::is_pointer_v<T>,
                  "jets::field: a pointer is not a field value (text is const char *)");
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>,
                  "jets::field: no JETS field type for this value");
    if constexpr (std::is_enum_v<T>) {
        return field(key, static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_same_v<T, bool>) {
        return field_value(jets_field_bool(key.handle(), v));
    } else if constexpr (std::is_floating_point_v<T>) {
        return field_value(jets_field_f64(key.handle(), static_cast<double>(v)));
    } else if constexpr (std::is_signed_v<T>) {
        return field_value(jets_field_i64(key.handle(), static_cast<int64_t>(v)));
    } else {
        return field_value(jets_field_u64(key.handle(), static_cast<uint64_t>(v)));
    }
}
/** An interned string value. */
inline field_value field(const str &key, const str &v) {
    return field_value(jets_field_str(key.handle(), v.handle()));
}
/** Text, copied by the call (NULL is refused by the call). */
inline field_value field(const str &key, const char *text) {
    return field_value(jets_field_text(key.handle(), text));
}
inline field_value field(const str &key, char *text) {
    return field(key, static_cast<const char *>(text));
}
/** Text from a view (copied here: a view need not end with a NUL). */
inline field_value field(const str &key, std::string_view text) {
    return field_value(key.handle(), std::string(text));
}
inline field_value field(const str &key, const std::string &text) {
    return field_value(key.handle(), text);
}
inline field_value field(const str &key, std::string &&text) {
    return field_value(key.handle(), std::move(text));
}

/**
 * The typed fields of a call: a braced list `{jets::field(k, v), ...}`, or a std::vector built at
 * run time when which fields a line has is known only then. A view: the list or vector must live
 * until the call returns (a temporary does).
 */
class fields {
public:
    fields() noexcept = default;
    fields(std::initializer_list<field_value> list) noexcept : list_(list) {}
    fields(const std::vector<field_value> &list) noexcept : vector_(&list) {}
    const field_value *begin() const noexcept { return vector_ ? vector_->data() : list_.begin(); }
    const field_value *end() const noexcept { return begin() + size(); }
    size_t size() const noexcept { return vector_ ? vector_->size() : list_.size(); }

private:
    std::initializer_list<field_value> list_;
    const std::vector<field_value> *vector_ = nullptr;
};

/** A record's final status (the format's closed set; a drift test compares it with jets-vocab). */
enum class status { running, stalled, complete, flushed };
/** An event's severity (the format's closed set; a drift test compares it with jets-vocab). */
enum class severity { info, warning, error };

/** The name the format gives a status, e.g. "flushed". */
inline const char *name(status s) noexcept {
    static const char *const names[] = {"running", "stalled", "complete", "flushed"};
    return names[static_cast<int>(s)];
}
/** The name the format gives a severity, e.g. "warning". */
inline const char *name(severity s) noexcept {
    static const char *const names[] = {"info", "warning", "error"};
    return names[static_cast<int>(s)];
}

/**
 * The `status` hint as a typed field (a record's state while it runs), with key and value
 * interned once per process: `rec.child(n, t, clk, {jets::hint(jets::status::stalled)})`.
 */
inline field_value hint(status s) {
    static const str key("status");
    static const str values[] = {str(name(status::running)), str(name(status::stalled)),
                                 str(name(status::complete)), str(name(status::flushed))};
    return field(key, values[static_cast<int>(s)]);
}
/** The `severity` hint of an event as a typed field, interned once per process. */
inline field_value hint(severity s) {
    static const str key("severity");
    static const str values[] = {str(name(severity::info)), str(name(severity::warning)),
                                 str(name(severity::error))};
    return field(key, values[static_cast<int>(s)]);
}

/** Where a line goes besides its record: its domain (jets::domain) and its clock (jets::clock). */
struct where {
    jets_domain domain = 0;
    jets_clock clock = 0;
};

namespace detail {
/** The C fields of a field list, in a buffer living as long as this object. */
class field_array {
public:
    explicit field_array(fields f) : size_(f.size()) {
        jets_field *out = small_;
        if (size_ > small_size) {
            big_.resize(size_);
            out = big_.data();
        }
        size_t i = 0;
        for (const field_value &v : f) out[i++] = v.get();
        data_ = size_ ? out : nullptr;
    }
    field_array(const field_array &) = delete;
    field_array &operator=(const field_array &) = delete;

    jets_attrs attrs(const str &name, jets_str type, where w) const {
        jets_attrs a = JETS_ATTRS_INIT;
        a.name = name.handle();
        a.record_type = type;
        a.fields = data_;
        a.field_count = size_;
        a.domain = w.domain;
        a.clock = w.clock;
        return a;
    }

private:
    static constexpr size_t small_size = 8;
    jets_field small_[small_size];
    std::vector<jets_field> big_;
    const jets_field *data_ = nullptr;
    size_t size_;
};
}  // namespace detail

/**
 * A scoped record: ends itself when it goes out of scope (at the trace clock, JETS_CLK_NOW),
 * unless end() or release() was called. Movable, not copyable.
 */
class record {
public:
    /** No record (id 0): a member to assign later; a call on it throws jets::error. */
    record() noexcept = default;
    record(detail::shared h, jets_id id) noexcept : h_(std::move(h)), id_(id) {}
    record(record &&o) noexcept : h_(std::move(o.h_)), id_(std::exchange(o.id_, 0)) {}
    record &operator=(record &&o) noexcept {
        if (this != &o) {
            finish();
            h_ = std::move(o.h_);
            id_ = std::exchange(o.id_, 0);
        }
        return *this;
    }
    record(const record &) = delete;
    record &operator=(const record &) = delete;
    /** Ends the record at the trace clock; a failure cannot be reported here and is ignored. */
    ~record() { finish(); }

    /** The record's id (0 once ended or released). */
    jets_id id() const noexcept { return id_; }

    /** Begins a child record at `clk` (or JETS_CLK_NOW). */
    record child(const char *name, const char *type, uint64_t clk = JETS_CLK_NOW,
                 const char *data_json = nullptr, const char *description = nullptr) const {
        return record(h_, detail::check_id(jets_record_begin(t(), id_, clk, name, type,
                                                             description, data_json)));
    }
    /** Begins a child record by interned names, with typed fields. */
    record child(const str &name, const str &type, uint64_t clk, fields f = {},
                 where w = {}) const {
        detail::field_array fa(f);
        jets_attrs a = fa.attrs(name, type.handle(), w);
        return record(h_, detail::check_id(jets_record_begin_ex(t(), id_, clk, &a)));
    }
    /** Emits an event at `clk` (or JETS_CLK_NOW). */
    void event(const char *name, uint64_t clk = JETS_CLK_NOW, const char *data_json = nullptr,
               const char *description = nullptr) const {
        detail::check(jets_event(t(), id_, clk, name, description, data_json));
    }
    /** Emits an event by interned name, with typed fields. */
    void event(const str &name, uint64_t clk, fields f = {}, where w = {}) const {
        detail::field_array fa(f);
        jets_attrs a = fa.attrs(name, 0, w);
        detail::check(jets_event_ex(t(), id_, clk, &a));
    }
    /** Emits a counter sample: an event `name` with `data.value`. */
    void counter(const str &name, uint64_t clk, double value) const {
        detail::check(jets_counter(t(), id_, clk, name.handle(), value));
    }
    /** Adds an annotation. */
    void annotation(const char *name, const char *data_json = nullptr,
                    const char *description = nullptr) const {
        detail::check(jets_annotation(t(), id_, name, description, data_json));
    }
    /** Adds an annotation by interned name, with typed fields. */
    void annotation(const str &name, fields f, where w = {}) const {
        detail::field_array fa(f);
        jets_attrs a = fa.attrs(name, 0, w);
        detail::check(jets_annotation_ex(t(), id_, &a));
    }
    /** Ends the record now, at `clk` (or JETS_CLK_NOW). On failure it stays open and owned. */
    void end(uint64_t clk = JETS_CLK_NOW) {
        detail::check(jets_record_end(t(), id_, clk));
        id_ = 0;
    }
    /** Ends the record with a final status: "running", "stalled", "complete" or "flushed". */
    void end(uint64_t clk, const char *status) {
        detail::check(jets_record_end_status(t(), id_, clk, status));
        id_ = 0;
    }
    /** Ends the record with a final status, typed: `rec.end(clk, jets::status::flushed)`. */
    void end(uint64_t clk, status s) { end(clk, name(s)); }
    /** Gives up ownership without ending: the record stays open (the footer counts it). */
    jets_id release() noexcept { return std::exchange(id_, 0); }

private:
    jets_trace *t() const noexcept { return h_ ? h_->t : nullptr; }
    void finish() noexcept {
        jets_id id = std::exchange(id_, 0);
        if (id != 0 && t() != nullptr) (void)jets_record_end(t(), id, JETS_CLK_NOW);
    }
    detail::shared h_;
    jets_id id_ = 0;
};

/** An open trace; closed (footer written) by close() or by the destructor. Movable. */
class trace {
public:
    /** Opens `path` (`.gz`/`.zst` compress) with header metadata given as a JSON object. */
    explicit trace(const char *path, const char *metadata_json = nullptr,
                   const jets_options *options = nullptr)
        : h_(std::make_shared<detail::handle>()) {
        detail::check(jets_open_ex(path, metadata_json, options, &h_->t));
    }
    trace(trace &&o) noexcept = default;
    trace &operator=(trace &&o) noexcept {
        if (this != &o) {
            release();
            h_ = std::move(o.h_);
        }
        return *this;
    }
    trace(const trace &) = delete;
    trace &operator=(const trace &) = delete;
    /** Closes the trace if close() was not called; an I/O error is lost here: call close(). */
    ~trace() { release(); }

    /** Begins a root record at `clk` (or JETS_CLK_NOW). */
    record root(const char *name, const char *type, uint64_t clk = JETS_CLK_NOW,
                const char *data_json = nullptr, const char *description = nullptr) {
        return record(h_, detail::check_id(jets_record_begin(get(), 0, clk, name, type,
                                                             description, data_json)));
    }
    /** Begins a root record by interned names, with typed fields. */
    record root(const str &name, const str &type, uint64_t clk, fields f = {}, where w = {}) {
        detail::field_array fa(f);
        jets_attrs a = fa.attrs(name, type.handle(), w);
        return record(h_, detail::check_id(jets_record_begin_ex(get(), 0, clk, &a)));
    }
    /** Switches tracing on or off at run time (a switched-off call costs one atomic load). */
    void set_enabled(bool on) { detail::check(jets_set_enabled(get(), on)); }
    /** The domain `name` (a subsystem that can be switched off on its own). */
    jets_domain domain(const char *name) {
        jets_domain d = jets_domain_create(get(), name);
        if (d == 0) throw error(jets_last_error_code(), jets_last_error());
        return d;
    }
    /** Enables or disables a domain's lines. */
    void set_enabled(jets_domain d, bool on) {
        detail::check(jets_domain_set_enabled(get(), d, on));
    }
    /** A clock at `mhz` whose cycles are converted to the trace's (needs clock_frequency_mhz). */
    jets_clock clock(const char *name, double mhz) {
        jets_clock c = jets_clock_create(get(), name, mhz);
        if (c == 0) throw error(jets_last_error_code(), jets_last_error());
        return c;
    }
    /** Sets the trace clock in cycles of clock `c`. */
    void set_clock(jets_clock c, uint64_t clk) { detail::check(jets_clock_set(get(), c, clk)); }
    /** Sets the cycle used by JETS_CLK_NOW (and by scoped records ending themselves). */
    void set_clock(uint64_t clk) { detail::check(jets_set_clock(get(), clk)); }
    /** Starts sampling this process into the trace (jets_host_monitor_start; 0: every 100 ms). */
    void host_monitor_start(uint32_t interval_ms = 0) {
        detail::check(jets_host_monitor_start(get(), interval_ms));
    }
    /** Stops the host monitor (close() stops it too). */
    void host_monitor_stop() { detail::check(jets_host_monitor_stop(get())); }
    /** Waits until everything emitted so far is written. */
    void flush() { detail::check(jets_flush(get())); }
    /** Turns capture on (jets_capture_on): lines from now on are written, as the setting
     *  (JETS_CAPTURE, or jets_options.capture) selects. */
    void capture_on() { detail::check(jets_capture_on(get())); }
    /** Turns capture off (jets_capture_off): until capture_on(), lines are left out. */
    void capture_off() { detail::check(jets_capture_off(get())); }
    /** Whether the file reached the size of JETS_CAPTURE's `limit=` clause and capture
     *  stopped for good (jets_limit_reached): capture_on() does nothing from then on. */
    bool limit_reached() {
        int rc = jets_limit_reached(get());
        if (rc < 0) detail::check(rc);
        return rc == 1;
    }
    /** Writes what the flight recorder holds now (jets_dump); without one, flush(). */
    void dump() { detail::check(jets_dump(get())); }
    /** Writes the footer and completes the file; the trace and its records are unusable
     *  afterwards (records still alive end nothing). */
    void close() { detail::check(jets_close(take())); }
    /** close() with the footer's capture_end_clk at least `clk`. */
    void close_at(uint64_t clk) { detail::check(jets_close_at(take(), clk)); }
    /** The C handle, for calls this wrapper does not cover (NULL once closed). */
    jets_trace *get() const noexcept { return h_ ? h_->t : nullptr; }

    /** The shared handle, for scoped ranges. */
    const detail::shared &shared() const noexcept { return h_; }

private:
    jets_trace *take() noexcept { return h_ ? std::exchange(h_->t, nullptr) : nullptr; }
    void release() noexcept {
        if (jets_trace *t = take()) (void)jets_close(t);
    }
    detail::shared h_;
};

/**
 * A pushed range (jets_push/jets_pop, as nvtxRangePush/Pop): a child of the innermost range this
 * thread pushed on the trace (a root when none), popped when it goes out of scope (at the trace
 * clock) or by end(). Ranges nest like scopes, so they are neither copyable nor movable.
 */
class range {
public:
    range(trace &t, const str &name, const str &type, uint64_t clk = JETS_CLK_NOW, fields f = {},
          where w = {})
        : h_(t.shared()) {
        detail::field_array fa(f);
        jets_attrs a = fa.attrs(name, type.handle(), w);
        id_ = detail::check_id(jets_push(h_->t, clk, &a));
    }
    range(const range &) = delete;
    range &operator=(const range &) = delete;
    ~range() {
        if (id_ != 0 && h_->t != nullptr) (void)jets_pop(h_->t, JETS_CLK_NOW);
    }
    /** The record's id. */
    jets_id id() const noexcept { return id_; }
    /** Pops now, at `clk`. */
    void end(uint64_t clk = JETS_CLK_NOW) {
        detail::check(jets_pop(h_->t, clk));
        id_ = 0;
    }

private:
    detail::shared h_;
    jets_id id_ = 0;
};

/**
 * A region of interest (jets_roi_begin/jets_roi_end, for the `roi` clause of JETS_CAPTURE, as
 * gem5's m5_work_begin/end): open while the object lives, closed as it goes out of scope, an
 * exception included. Regions nest, and may be opened on any thread; neither copyable nor
 * movable, like a range.
 */
class region {
public:
    explicit region(trace &t) : h_(t.shared()) { detail::check(jets_roi_begin(h_->t)); }
    region(const region &) = delete;
    region &operator=(const region &) = delete;
    ~region() {
        if (h_->t != nullptr) (void)jets_roi_end(h_->t);
    }

private:
    detail::shared h_;
};

}  // namespace jets

#endif /* JETS_HPP */
