// A DMA engine model in C++17, traced with the RAII wrapper jets.hpp.
//
// The engine takes a queue of descriptors (source, destination, length), splits each transfer into
// bursts of up to 64 bytes and keeps up to 4 bursts in flight: a burst's read is issued, returns
// after a memory latency that depends on the source bank, and its write completes 2 cycles later.
// Every descriptor is a scoped record (it ends itself when the transfer completes), every burst a
// child with ReadIssue/ReadData/WriteDone events.
//
// Usage: dma OUT.jets [DESCRIPTORS]   (default 24)
// Prints "copied ... ok" when the destination memory equals what the descriptors asked for.
#include <jets.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kMemory = 1 << 16;
constexpr std::size_t kBurst = 64;
constexpr std::size_t kInFlight = 4;

struct Descriptor {
    std::size_t src, dst, len;
};

struct Burst {
    std::size_t src, dst, len;
    std::uint64_t data_at, done_at;
    jets::record rec;
};

struct Transfer {
    Descriptor d;
    std::size_t issued = 0, completed = 0;
    std::optional<jets::record> rec;
};

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: %s OUT.jets [DESCRIPTORS]\n", argv[0]);
        return 2;
    }
    const int count = argc > 2 ? std::atoi(argv[2]) : 24;
    if (count < 1 || count > 200) {
        std::fprintf(stderr, "dma: DESCRIPTORS must be in [1, 200]\n");
        return 2;
    }
    std::vector<std::uint8_t> mem(kMemory);
    for (std::size_t i = 0; i < kMemory / 2; i++) mem[i] = static_cast<std::uint8_t>(i * 31 + 7);
    // Non-overlapping copies from the lower half to the upper half, of uneven lengths.
    std::vector<Descriptor> descs;
    std::size_t src = 0, dst = kMemory / 2;
    for (int i = 0; i < count; i++) {
        std::size_t len = 40 + static_cast<std::size_t>(i * 37 % 300);
        descs.push_back({src, dst, len});
        src += len + 16;
        dst += len;
    }
    if (dst > kMemory || src > kMemory / 2) {
        std::fprintf(stderr, "dma: descriptors do not fit in memory\n");
        return 2;
    }

    std::uint64_t cycle = 0;
    std::size_t bytes = 0, bursts = 0;
    try {
        jets::trace trace(argv[1], R"({"hardware_model":"dma-engine","clock_frequency_mhz":800})");
        const jets::str burst_name("burst"), burst_type("Burst"), read_issue("ReadIssue"),
            read_data("ReadData"), write_done("WriteDone"), k_src("src"), k_dst("dst"),
            k_len("len"), k_bank("bank");
        jets::record engine = trace.root("dma0", "DmaEngine", 0, R"({"unit_id":0})");
        engine.annotation("Config", R"({"burst_bytes":64,"max_in_flight":4})");

        std::deque<Transfer> queue;
        for (const Descriptor &d : descs) queue.push_back(Transfer{d, 0, 0, std::nullopt});
        std::deque<Burst> in_flight;
        std::size_t next = 0;  // first transfer with bursts left to issue
        while (!queue.empty()) {
            trace.set_clock(cycle);
            // Complete bursts whose write is done (in order of issue).
            while (!in_flight.empty() && in_flight.front().done_at <= cycle) {
                Burst b = std::move(in_flight.front());
                in_flight.pop_front();
                for (std::size_t i = 0; i < b.len; i++) mem[b.dst + i] = mem[b.src + i];
                b.rec.event(write_done, cycle, {jets::field(k_len, b.len)});
                b.rec.end(cycle);
                bytes += b.len;
                Transfer &t = queue.front();
                t.completed += b.len;
                if (t.completed == t.d.len) {
                    t.rec.reset();  // the scoped descriptor record ends itself, at this cycle
                    queue.pop_front();
                    next--;
                }
            }
            // Issue new bursts while there is room.
            while (in_flight.size() < kInFlight && next < queue.size()) {
                Transfer &t = queue[next];
                if (!t.rec) {
                    std::string name = "desc@" + std::to_string(t.d.src);
                    std::string data = R"({"src":)" + std::to_string(t.d.src) + R"(,"dst":)" +
                                       std::to_string(t.d.dst) + R"(,"len":)" +
                                       std::to_string(t.d.len) + "}";
                    t.rec.emplace(engine.child(name.c_str(), "Transfer", cycle, data.c_str()));
                }
                std::size_t len = std::min(kBurst, t.d.len - t.issued);
                std::size_t s = t.d.src + t.issued, d = t.d.dst + t.issued;
                std::uint64_t bank = (s / 4096) % 4;
                std::uint64_t latency = 6 + bank * 3;
                jets::record rec = t.rec->child(burst_name, burst_type, cycle,
                                                {jets::field(k_src, s), jets::field(k_dst, d),
                                                 jets::field(k_len, len), jets::field(k_bank, bank)});
                rec.event(read_issue, cycle);
                rec.event(read_data, cycle + latency);
                in_flight.push_back(Burst{s, d, len, cycle + latency, cycle + latency + 2,
                                          std::move(rec)});
                bursts++;
                t.issued += len;
                if (t.issued == t.d.len) next++;
            }
            cycle++;
        }
        engine.end(cycle);
        trace.close_at(cycle);
    } catch (const jets::error &e) {
        std::fprintf(stderr, "dma: %s\n", e.what());
        return 1;
    }

    for (const Descriptor &d : descs)
        for (std::size_t i = 0; i < d.len; i++)
            if (mem[d.dst + i] != mem[d.src + i]) {
                std::fprintf(stderr, "dma: byte %zu of the copy to %zu differs\n", i, d.dst);
                return 1;
            }
    std::printf("copied %zu bytes in %zu bursts of %d descriptors in %llu cycles ok\n", bytes,
                bursts, count, static_cast<unsigned long long>(cycle));
    return 0;
}
