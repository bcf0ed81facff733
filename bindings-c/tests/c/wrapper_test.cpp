// C++17 test of jets.hpp: scoped records end themselves, failures throw jets::error with the
// right code, move semantics keep exactly one owner, threads share a record by reference.
// Usage: wrapper_test TRACE   (prints an "expect ..." line for check_trace.py)
#include <jets.hpp>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

template <typename F>
static int error_code_of(F &&f) {
    try {
        f();
    } catch (const jets::error &e) {
        return e.code();
    }
    return JETS_OK;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s TRACE\n", argv[0]);
        return 2;
    }
    unsigned long records = 0, ends = 0, events = 0, annotations = 0;
    CHECK(error_code_of([] { jets::trace bad(nullptr); }) == JETS_ERR_INVALID_ARGUMENT);
    CHECK(error_code_of([] { jets::trace bad("/nonexistent-dir/x.jets"); }) == JETS_ERR_IO);
    CHECK(error_code_of([] { jets::str bad(nullptr); }) == JETS_ERR_INVALID_ARGUMENT);
    try {
        jets::trace t(argv[1], R"({"hardware_model":"cpp-test"})");
        jets::record top = t.root("top", "Top", 0, R"({"unit_id":0})");
        records++;
        {
            jets::record scoped = top.child("scoped", "Block", 1);
            records++;
            scoped.event("Inside", 2, R"({"k":"v"})", "an event");
            events++;
            scoped.annotation("Note", R"({"n":1})");
            annotations++;
            t.set_clock(5);
        }  // ends itself at clk 5
        ends++;
        {
            jets::record moved_from = top.child("moved", "Block", 6);
            records++;
            jets::record owner = std::move(moved_from);
            CHECK(moved_from.id() == 0);
            CHECK(owner.id() != 0);
            t.set_clock(8);
        }  // the owner ends it once; the moved-from record does nothing
        ends++;

        // Typed fields by interned names.
        const jets::str insn("Instruction"), add("add"), pc("pc"), lat("latency"), hit("hit");
        const jets::str unit("unit"), alu("ALU"), ratio("ratio"), retire("Retire");
        {
            jets::record r = top.child(add, insn, 10,
                                       {jets::field(pc, 0x1000u), jets::field(lat, -2),
                                        jets::field(hit, true), jets::field(unit, alu),
                                        jets::field(ratio, 0.5)});
            records++;
            r.event(retire, 12, {jets::field(pc, std::uint64_t{0x1004})});
            events++;
            r.annotation(retire, {jets::field(lat, 3)});
            annotations++;
            // Failures throw with the right code, and the record stays usable.
            CHECK(error_code_of([&] { r.end(9); }) == JETS_ERR_CLK_BEFORE_START);
            CHECK(error_code_of([&] { r.event("e", 9); }) == JETS_ERR_CLK_BEFORE_START);
            CHECK(error_code_of([&] { r.event("e", 11, "{bad"); }) == JETS_ERR_INVALID_JSON);
            CHECK(error_code_of([&] { r.child("c", "T", 11, "[1]"); }) == JETS_ERR_INVALID_JSON);
            CHECK(error_code_of([&] { r.annotation("\xff"); }) == JETS_ERR_INVALID_UTF8);
            r.end(13);
            ends++;
            CHECK(r.id() == 0);
        }

        {
            // Every field overload keeps its type: a literal is text (never `true`), strings and
            // views are copied, numbers keep signedness and width. The script greps the line.
            const jets::str typed("Typed"), g("greeting"), s("s"), v("v"), b("b"), f("f"),
                i8("i8"), u16("u16"), e("e"), m("m"), tmp("tmp");
            std::string owned = "from std::string";
            std::string_view view = std::string_view("a view, not NUL-terminated!!", 6);
            enum class level : unsigned char { high = 3 };
            char mutable_text[] = "mutable";
            top.event(typed, 14,
                      {jets::field(g, "hello"), jets::field(s, owned), jets::field(v, view),
                       jets::field(b, false), jets::field(f, 1.5f),
                       jets::field(i8, static_cast<signed char>(-3)),
                       jets::field(u16, static_cast<unsigned short>(65535)),
                       jets::field(e, level::high), jets::field(m, mutable_text),
                       jets::field(tmp, std::string("a temporary"))});
            events++;
            // Push/pop ranges nest like scopes; a counter; a domain switched off; end status.
            const jets::str stage("Stage"), depth("queue_depth");
            {
                jets::range outer(t, stage, stage, 15);
                jets::range inner(t, stage, stage, 16);
                records += 2;
                t.set_clock(17);
            }
            ends += 2;
            top.counter(depth, 17, 4.0);
            events++;
            jets_domain quiet = t.domain("quiet");
            t.set_enabled(quiet, false);
            jets::record off = top.child(stage, stage, 17, {}, jets::where{quiet, 0});
            CHECK(off.id() == JETS_ID_OFF);
            off.event(stage, 17);
            off.end(17);
            jets::record squashed = top.child("squashed", "Instruction", 17);
            records++;
            squashed.end(18, "flushed");
            ends++;
            CHECK(error_code_of([&] {
                      jets::record r = top.child("r", "R", 18);
                      r.end(18, "sideways");
                  }) == JETS_ERR_INVALID_ARGUMENT);
            records++;  // "r" was begun, then ended by its destructor
            ends++;

            // Typed statuses and severities; fields chosen at run time (more than the wrapper's
            // 8-field buffer); a default-constructed record assigned later (the suite greps these).
            jets::record later;
            CHECK(later.id() == 0);
            CHECK(error_code_of([&] { later.event(stage, 18); }) == JETS_ERR_INVALID_ARGUMENT);
            later = top.child(jets::str("typed-status"), jets::str("Instruction"), 18,
                              {jets::hint(jets::status::stalled)});
            records++;
            std::vector<jets::str> keys;
            for (int k = 0; k < 10; k++) keys.emplace_back("k" + std::to_string(k));
            std::vector<jets::field_value> dynamic{jets::hint(jets::severity::warning)};
            for (int k = 0; k < 10; k++) dynamic.push_back(jets::field(keys[k], k));
            later.event(jets::str("dynamic"), 18, dynamic);
            events++;
            jets::record moved(std::move(later));
            CHECK(later.id() == 0 && moved.id() != 0);
            moved.end(19, jets::status::flushed);
            ends++;
            CHECK(std::string(jets::name(jets::severity::error)) == "error");
        }

        // Threads share `top` by reference; each scoped child ends itself.
        std::vector<std::thread> threads;
        std::vector<int> ok(4, 0);
        for (int i = 0; i < 4; i++) {
            threads.emplace_back([&top, &ok, i] {
                try {
                    for (int j = 0; j < 100; j++) {
                        std::string name = "w" + std::to_string(i) + "." + std::to_string(j);
                        jets::record c = top.child(name.c_str(), "Work", 20 + j);
                        c.event("Step", 21 + j);
                        c.end(22 + j);
                    }
                    ok[i] = 1;
                } catch (const jets::error &e) {
                    std::fprintf(stderr, "thread %d: %s\n", i, e.what());
                }
            });
        }
        for (auto &th : threads) th.join();
        for (int v : ok) CHECK(v == 1);
        records += 400;
        events += 400;
        ends += 400;

        {
            // The host monitor, into a trace of its own (its sample count depends on timing).
            jets::trace h((std::string(argv[1]) + ".host").c_str());
            CHECK(error_code_of([&] { h.host_monitor_stop(); }) == JETS_ERR_INVALID_ARGUMENT);
            h.host_monitor_start(5);
            CHECK(error_code_of([&] { h.host_monitor_start(5); }) == JETS_ERR_INVALID_ARGUMENT);
            h.host_monitor_stop();
            h.close();
        }

        {
            // Records outliving their trace's close() or destruction touch nothing freed (the
            // sanitizer and valgrind runs would say); a call on them reports the closed trace.
            std::optional<jets::record> survivor;
            {
                jets::trace late((std::string(argv[1]) + ".late").c_str());
                jets::record r = late.root("r", "R", 0);
                survivor.emplace(late.root("s", "S", 0));
                late.close();
                CHECK(late.get() == nullptr);
                CHECK(error_code_of([&] { r.event("late", 1); }) == JETS_ERR_INVALID_ARGUMENT);
            }
            {
                jets::trace dropped((std::string(argv[1]) + ".dropped").c_str());
                survivor.emplace(dropped.root("d", "D", 0));
            }  // closed by its destructor, with the record still alive
            survivor.reset();
        }

        {
            // Capture set in code (it wins over JETS_CAPTURE): only what a region of interest
            // encloses while capture is on is written, with the record above it; a dump without
            // a recorder is a flush.
            jets_options o = JETS_OPTIONS_INIT;
            o.capture = "roi";
            jets::trace c((std::string(argv[1]) + ".roi").c_str(), nullptr, &o);
            jets::record core = c.root("core", "Core", 0);
            core.event("before", 1);
            {
                jets::region roi(c);
                core.event("inside", 2);
                {
                    jets::region nested(c);
                    c.capture_off();
                    core.event("off", 3);
                    c.capture_on();
                    core.event("nested", 4);
                }
                core.event("inside-again", 5);
            }
            core.event("after", 6);
            c.dump();
            CHECK(jets_roi_end(c.get()) == JETS_ERR_INVALID_ARGUMENT);  // every region closed
            core.end(7);
            c.close();
        }

        {
            // A size limit (CAP-LIM-1): limit_reached() turns true once the file holds 16 KiB,
            // and capture_on() no longer turns capture on.
            jets_options o = JETS_OPTIONS_INIT;
            o.capture = "limit=16KiB";
            jets::trace l((std::string(argv[1]) + ".limit").c_str(), nullptr, &o);
            jets::record run = l.root("run", "Run", 0);
            CHECK(!l.limit_reached());
            uint64_t clk = 0;
            while (!l.limit_reached() && clk < 1000000) {
                run.event("tick", ++clk);
                if (clk % 64 == 0) l.flush();
            }
            CHECK(l.limit_reached());
            l.capture_on();
            run.event("after-the-limit", clk + 1);
            run.end(clk + 2);
            l.close();
        }

        jets::record kept = top.child("kept-open", "Block", 30);
        records++;
        CHECK(kept.release() != 0);  // stays open: the footer counts it
        top.end(200);
        ends++;
        CHECK(error_code_of([&] { top.end(201); }) == JETS_ERR_INVALID_ARGUMENT);  // id is 0 now
        t.close_at(300);
        CHECK(t.get() == nullptr);
        CHECK(error_code_of([&] { t.close(); }) == JETS_ERR_INVALID_ARGUMENT);
    } catch (const jets::error &e) {
        std::fprintf(stderr, "unexpected jets::error %d: %s\n", e.code(), e.what());
        return 1;
    }
    std::printf("expect records=%lu record_ends=%lu events=%lu annotations=%lu open=1 end_clk=300\n",
                records, ends, events, annotations);
    if (failures) std::fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
