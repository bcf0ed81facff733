/*
 * firmware.c: the AVR program the simavr example runs (atmega328p, avr-gcc + avr-libc).
 *
 * It fills an array of N bytes from a 16-bit LCG, sorts it (insertion sort), and computes a
 * Fletcher-16 checksum of the sorted bytes, ROUNDS times (seeds SEED, SEED+1, ...; the result is
 * the sum of the checksums, mod 2^16), while Timer0's overflow interrupt counts ticks.
 * The kernel (fill, sort, checksum) is bracketed by markers written to GPIOR0 (1 = begin,
 * 2 = end), which the harness turns into jets_roi_begin/jets_roi_end. The results leave through
 * GPIOR1, one byte at a time: the checksum sum (low, high), whether the array came out sorted, and
 * the tick count (low, high). Then the program stops the core (sleep with interrupts off),
 * which simavr treats as a graceful end.
 *
 * Built with -DFAULT, it calls through a corrupted function pointer after the kernel: the jump
 * lands outside the flash, and the harness reports the fault.
 */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <stdint.h>

#ifndef N
#define N 64
#endif
#ifndef SEED
#define SEED 12345u
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif

static volatile uint16_t ticks;
static uint8_t data[N];

ISR(TIMER0_OVF_vect) { ticks++; }

static void report(uint8_t byte) { GPIOR1 = byte; }

static void fill(uint16_t x) {
    for (uint8_t i = 0; i < N; i++) {
        x = (uint16_t)(x * 25173u + 13849u);
        data[i] = (uint8_t)(x >> 8);
    }
}

static void sort(void) {
    for (uint8_t i = 1; i < N; i++) {
        uint8_t v = data[i];
        uint8_t j = i;
        while (j > 0 && data[j - 1] > v) {
            data[j] = data[j - 1];
            j--;
        }
        data[j] = v;
    }
}

static uint16_t fletcher16(void) {
    uint16_t a = 0, b = 0;
    for (uint8_t i = 0; i < N; i++) {
        a = (uint16_t)((a + data[i]) % 255u);
        b = (uint16_t)((b + a) % 255u);
    }
    return (uint16_t)((b << 8) | a);
}

static uint8_t is_sorted(void) {
    for (uint8_t i = 1; i < N; i++)
        if (data[i - 1] > data[i])
            return 0;
    return 1;
}

#ifdef FAULT
/* A function pointer as a stray write would leave it: its word address is past the end of the
 * 16 Ki-word flash. */
static void (*volatile handler)(void) = (void (*)(void))0x6000;
#endif

int main(void) {
    TCCR0B = _BV(CS00); /* Timer0 at the CPU clock: an overflow every 256 cycles */
    TIMSK0 = _BV(TOIE0);
    sei();

    GPIOR0 = 1;
    uint16_t sum = 0;
    for (uint16_t r = 0; r < ROUNDS; r++) {
        fill((uint16_t)(SEED + r));
        sort();
        sum = (uint16_t)(sum + fletcher16());
    }
    GPIOR0 = 2;

#ifdef FAULT
    handler();
#endif
    cli();
    uint16_t t = ticks;
    report((uint8_t)sum);
    report((uint8_t)(sum >> 8));
    report(is_sorted());
    report((uint8_t)t);
    report((uint8_t)(t >> 8));
    set_sleep_mode(SLEEP_MODE_PWR_DOWN);
    sleep_enable();
    sleep_cpu();
    for (;;) {
    }
}
