/*
 * jets.hpp: a C++17 RAII wrapper over libjets (jets.h).
 *
 *   jets::trace t("run.jets", R"({"hardware_model":"Tiny5"})");
 *   {
 *       jets::record core = t.root("core0", "Core", 0);
 *       core.event("Decode", 5, R"({"pc":4096})");
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

#include "jets.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

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
    jets_str handle() const noexcept { return h_; }

private:
    jets_str h_;
};

/** A typed `data` field: an integer, float, bool or interned string, without JSON text. */
inline jets_field field(const str &key, bool v) { return jets_field_bool(key.handle(), v); }
inline jets_field field(const str &key, double v) { return jets_field_f64(key.handle(), v); }
inline jets_field field(const str &key, const str &v) {
    return jets_field_str(key.handle(), v.handle());
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
inline jets_field field(const str &key, T v) {
    if constexpr (std::is_signed_v<T>) {
        return jets_field_i64(key.handle(), static_cast<int64_t>(v));
    } else {
        return jets_field_u64(key.handle(), static_cast<uint64_t>(v));
    }
}

/** Fields for the typed overloads below. */
using fields = std::initializer_list<jets_field>;

namespace detail {
inline jets_attrs attrs(const str &name, jets_str type, fields f) {
    jets_attrs a = JETS_ATTRS_INIT;
    a.name = name.handle();
    a.record_type = type;
    a.fields = f.size() ? f.begin() : nullptr;
    a.field_count = f.size();
    return a;
}
}  // namespace detail

/**
 * A scoped record: ends itself when it goes out of scope (at the trace clock, JETS_CLK_NOW),
 * unless end() or release() was called. Movable, not copyable.
 */
class record {
public:
    record(detail::shared h, jets_id id) noexcept : h_(std::move(h)), id_(id) {}
    record(record &&o) noexcept : h_(o.h_), id_(std::exchange(o.id_, 0)) {}
    record &operator=(record &&o) noexcept {
        if (this != &o) {
            finish();
            h_ = o.h_;
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
    record child(const str &name, const str &type, uint64_t clk, fields f = {}) const {
        jets_attrs a = detail::attrs(name, type.handle(), f);
        return record(h_, detail::check_id(jets_record_begin_ex(t(), id_, clk, &a)));
    }
    /** Emits an event at `clk` (or JETS_CLK_NOW). */
    void event(const char *name, uint64_t clk = JETS_CLK_NOW, const char *data_json = nullptr,
               const char *description = nullptr) const {
        detail::check(jets_event(t(), id_, clk, name, description, data_json));
    }
    /** Emits an event by interned name, with typed fields. */
    void event(const str &name, uint64_t clk, fields f = {}) const {
        jets_attrs a = detail::attrs(name, 0, f);
        detail::check(jets_event_ex(t(), id_, clk, &a));
    }
    /** Adds an annotation. */
    void annotation(const char *name, const char *data_json = nullptr,
                    const char *description = nullptr) const {
        detail::check(jets_annotation(t(), id_, name, description, data_json));
    }
    /** Adds an annotation by interned name, with typed fields. */
    void annotation(const str &name, fields f) const {
        jets_attrs a = detail::attrs(name, 0, f);
        detail::check(jets_annotation_ex(t(), id_, &a));
    }
    /** Ends the record now, at `clk` (or JETS_CLK_NOW). On failure it stays open and owned. */
    void end(uint64_t clk = JETS_CLK_NOW) {
        detail::check(jets_record_end(t(), id_, clk));
        id_ = 0;
    }
    /** Gives up ownership without ending: the record stays open (the footer counts it). */
    jets_id release() noexcept { return std::exchange(id_, 0); }

private:
    jets_trace *t() const noexcept { return h_ ? h_->t : nullptr; }
    void finish() noexcept {
        jets_id id = std::exchange(id_, 0);
        if (id != 0 && t() != nullptr) (void)jets_record_end(t(), id, JETS_CLK_NOW);
    }
    detail::shared h_;
    jets_id id_;
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
    record root(const str &name, const str &type, uint64_t clk, fields f = {}) {
        jets_attrs a = detail::attrs(name, type.handle(), f);
        return record(h_, detail::check_id(jets_record_begin_ex(get(), 0, clk, &a)));
    }
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
    /** Writes the footer and completes the file; the trace and its records are unusable
     *  afterwards (records still alive end nothing). */
    void close() { detail::check(jets_close(take())); }
    /** close() with the footer's capture_end_clk at least `clk`. */
    void close_at(uint64_t clk) { detail::check(jets_close_at(take(), clk)); }
    /** The C handle, for calls this wrapper does not cover (NULL once closed). */
    jets_trace *get() const noexcept { return h_ ? h_->t : nullptr; }

private:
    jets_trace *take() noexcept { return h_ ? std::exchange(h_->t, nullptr) : nullptr; }
    void release() noexcept {
        if (jets_trace *t = take()) (void)jets_close(t);
    }
    detail::shared h_;
};

}  // namespace jets

#endif /* JETS_HPP */
