/*
 * jrand.h — java.util.Random, bit for bit.
 *
 * The Nexmark generator seeds a fresh java.util.Random with each event's id
 * (Beam's Generator.nextEvent), so reproducing Beam's and Flink's events
 * means reproducing this 48-bit LCG and the exact way each method consumes
 * it (JDK 8+; the algorithms are specified in the class's javadoc and have
 * not changed since).  Everything is static inline: the generator calls
 * nextInt() a few hundred times per auction, and with a constant bound the
 * compiler turns `% bound` into a multiply.
 *
 * Java's int arithmetic wraps; here the same operations are done on
 * uint32_t/uint64_t and converted back, so no signed overflow (undefined
 * in C) is ever evaluated.  Not thread-safe: one struct jrand per caller.
 */
#ifndef SFS_NEXMARK_JRAND_H
#define SFS_NEXMARK_JRAND_H

#include <stdint.h>

#define JR_MULT 0x5DEECE66Dull
#define JR_ADD 0xBull
#define JR_MASK ((1ull << 48) - 1)

/* Two steps at once: seed' ' = seed * MULT2 + ADD2 (mod 2^48), what two
 * next() calls leave; lets a caller compute both candidate next states of
 * a data-dependent draw in parallel (next_string in gen.c). */
#define JR_MULT2 ((JR_MULT * JR_MULT) & JR_MASK)
#define JR_ADD2 ((JR_MULT * JR_ADD + JR_ADD) & JR_MASK)

struct jrand {
	uint64_t jr_seed;	/* the 48-bit state, already scrambled */
};

/* new Random(seed) / setSeed(seed). */
static inline void jr_seed(struct jrand *r, int64_t seed)
{
	r->jr_seed = ((uint64_t)seed ^ JR_MULT) & JR_MASK;
}

/* next(bits), 1 <= bits <= 32: the top @bits of the advanced state, as
 * Java's (int) cast sees them (so next(32) may be negative). */
static inline int32_t jr_next(struct jrand *r, int bits)
{
	r->jr_seed = (r->jr_seed * JR_MULT + JR_ADD) & JR_MASK;
	return (int32_t)(uint32_t)(r->jr_seed >> (48 - bits));
}

/* nextInt(): all 32 bits. */
static inline int32_t jr_next_int(struct jrand *r)
{
	return jr_next(r, 32);
}

/* Whether nextInt(@bound) retries @bits, a next(31) whose remainder is
 * @val (the incomplete last block: Java's int overflow test). */
static inline int jr_rejects(int32_t bits, int32_t val, int32_t bound)
{
	return (int32_t)((uint32_t)bits - (uint32_t)val + (uint32_t)(bound - 1)) < 0;
}

/*
 * nextInt(bound), bound > 0: uniform in [0, bound).  A power of two takes
 * the high bits; otherwise the remainder, rejecting the draws of the last
 * incomplete block (the `u - v + m < 0` test is Java's int overflow check,
 * done here in uint32_t and read back as a sign).
 */
static inline int32_t jr_next_int_n(struct jrand *r, int32_t bound)
{
	int32_t bits = jr_next(r, 31), val;

	if ((bound & -bound) == bound)
		return (int32_t)(((int64_t)bound * bits) >> 31);
	for (;;) {
		val = bits % bound;
		if (!jr_rejects(bits, val, bound))
			return val;
		bits = jr_next(r, 31);
	}
}

/* nextLong(): two 32-bit draws, high first, added with Java's wrap. */
static inline int64_t jr_next_long(struct jrand *r)
{
	uint64_t hi = (uint64_t)(int64_t)jr_next(r, 32) << 32;

	return (int64_t)(hi + (uint64_t)(int64_t)jr_next(r, 32));
}

/* nextDouble(): 53 random bits scaled to [0, 1). */
static inline double jr_next_double(struct jrand *r)
{
	int64_t hi = (int64_t)jr_next(r, 26) << 27;

	return (double)(hi + jr_next(r, 27)) * 0x1.0p-53;
}

#endif
