/*
 * Tests of src/pcg32.c (include/mha_pcg32.h) against the PCG authors' published
 * outputs and against independent checks.
 *
 * Published vectors: the expected output of the PCG authors' check-pcg32 program,
 * test-high/expected/check-pcg32.out in github.com/imneme/pcg-c (read at commit
 * 89b7dfbc5a50e5bf272cfac29dc435e81d2080d3). It seeds (42, 54) and prints five rounds;
 * each round draws, in this order, on one generator:
 *   six 32-bit outputs; a jump back by 6 and the same six outputs again ("Again");
 *   65 coin flips "TH"[bounded(2)]; 33 die rolls bounded(6) + 1; and a 52-card
 *   Fisher–Yates shuffle (i = 52 down to 2: c = bounded(i), swap cards[c], cards[i−1]),
 *   card c printed as "A23456789TJQK"[c/4] "hcds"[c%4].
 * The round-1 outputs, coins and rolls also appear in ../shared/reference/pcg32.md.
 *
 * All tests share the prefix pcg32_ (cmocka_set_test_filter("pcg32_*")).
 */
#include "test_util.h"

#include <math.h>
#include <string.h>

#include "mha_pcg32.h"

enum { ROUNDS = 5, OUTS = 6, COINS = 65, ROLLS = 33, CARDS = 52, SUITS = 4 };

typedef struct published_round {
    uint32_t out[OUTS];
    const char *coins; /* COINS characters, H = nonzero draw        */
    const char *rolls; /* ROLLS digits 1..6, separated by one space */
    const char *cards; /* CARDS two-character cards, space-separated */
} published_round;

/* check-pcg32.out, transcribed; the card lines are joined (the file wraps them). */
static const published_round k_rounds[ROUNDS] = {
    {{0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu},
     "HHTTTHTHHHTHTTTHHHHHTTTHHHTHTHTHTTHTTTHHHHHHTTTTHHTTTTTHTTTTTTTHT",
     "3 4 1 1 2 2 3 2 4 3 2 4 3 3 5 2 3 1 3 1 5 1 4 1 5 6 4 6 6 2 6 3 3",
     "Qd Ks 6d 3s 3d 4c 3h Td Kc 5c Jh Kd Jd As 4s 4h Ad Th Ac Jc 7s Qs "
     "2s 7h Kh 2d 6c Ah 4d Qh 9h 6s 5s 2c 9c Ts 8d 9s 3c 8c Js 5d 2h 6h "
     "7d 8s 9d 5h 8h Qc 7c Tc"},
    {{0x74ab93adu, 0x1c1da000u, 0x494ff896u, 0x34462f2fu, 0xd308a3e5u, 0x0fa83babu},
     "HHHHHHHHHHTHHHTHTHTHTHTTTTHHTTTHHTHHTHTTHHTTTHHHHHHTHTTHTHTTTTTTT",
     "5 1 1 3 3 2 4 5 3 2 2 6 4 3 2 4 2 4 3 2 3 6 3 2 3 4 2 4 1 1 5 4 4",
     "7d 2s 7h Td 8s 3c 3d Js 2d Tc 4h Qs 5c 9c Th 2c Jc Qd 9d Qc 7s 3s "
     "5s 6h 4d Jh 4c Ac 4s 5h 5d Kc 8h 8d Jd 9s Ad 6s 6c Kd 2h 3h Kh Ts "
     "Qh 9h 6d As 7c Ks Ah 8c"},
    {{0x39af5f9fu, 0x04196b18u, 0xc3c3eb28u, 0xc076c60cu, 0xc693e135u, 0xf8f63932u},
     "HTTHHTTTTTHTTHHHTHTTHHTTHTHHTHTHTTTTHHTTTHHTHHTTHTTHHHTHHHTHTTTHT",
     "5 1 5 3 2 2 4 5 3 3 1 3 4 6 3 2 3 4 2 2 3 1 5 2 4 6 6 4 2 4 3 3 6",
     "Kd Jh Kc Qh 4d Qc 4h 9d 3c Kh Qs 8h 5c Jd 7d 8d 3h 7c 8s 3s 2h Ks "
     "9c 9h 2c 8c Ad 7s 4s 2s 5h 6s 4c Ah 7h 5s Ac 3d 5d Qd As Tc 6h 9s "
     "2d 6c 6d Td Jc Ts Th Js"},
    {{0x55ce6851u, 0x97a7726du, 0x17e10815u, 0x58007d43u, 0x962fb148u, 0xb9bb55bdu},
     "HHTHHTTTTHTHHHHHTTHHHTTTHHTHTHTHTHHTTHTHHHHHHTHHTHHTHHTTTTHHTHHTT",
     "6 6 3 2 3 4 2 6 4 2 6 3 2 3 5 5 3 4 4 6 6 2 6 5 4 4 6 1 6 1 3 6 5",
     "Qd 8h 5d 8s 8d Ts 7h Th Qs Js 7s Kc 6h 5s 4d Ac Jd 7d 7c Td 2c 6s "
     "5h 6d 3s Kd 9s Jh Kh As Ah 9h 3c Qh 9c 2d Tc 9d 2s 3d Ks 4h Qc Ad "
     "Jc 8c 2h 3h 4s 4c 5c 6c"},
    {{0xfcef7cd6u, 0x1b488b5au, 0xd0daf7eau, 0x1d9a70f7u, 0x241a37cfu, 0x9a3857b7u},
     "HHHHTHHTTHTTHHHTTTHHTHTHTTTTHTTHTHTTTHHHTHTHTTHTTHTHHTHTHHHTHTHTT",
     "5 4 1 2 6 1 3 1 5 6 3 6 2 1 4 4 5 2 1 5 6 5 6 4 4 4 5 2 6 4 3 5 6",
     "4d 9s Qc 9h As Qs 7s 4c Kd 6h 6s 2c 8c 5d 7h 5h Jc 3s 7c Jh Js Ks "
     "Tc Jd Kc Th 3h Ts Qh Ad Td 3c Ah 2d 3d 5c Ac 8s 5s 9c 2h 6c 6d Kh "
     "Qd 8d 7d 2s 8h 4h 9d 4s"},
};

static const char k_rank[] = "A23456789TJQK";
static const char k_suit[] = "hcds";

/* bounded() that must succeed; fails the test otherwise. */
static uint32_t draw_bounded(mha_pcg32 *rng, uint32_t bound)
{
    uint32_t r = UINT32_MAX;
    assert_int_equal(mha_pcg32_bounded(rng, bound, &r), 0);
    assert_true(r < bound);
    return r;
}

/* Seeding (42, 54) gives state 0x185706b82c2e03f8 and inc 0x6d = (54 << 1) | 1. */
static void pcg32_seed_state_and_inc(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 42u, 54u);
    assert_int_equal(rng.state, 0x185706b82c2e03f8ull);
    assert_int_equal(rng.inc, 0x6dull);
    assert_int_equal(rng.inc & 1u, 1u);
}

/* All five published check-pcg32 rounds reproduce draw for draw on one generator:
 * outputs, jump back by 6 and the same outputs, 65 coins, 33 dice, and the deck. */
static void pcg32_published_rounds(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 42u, 54u);
    for (int round = 0; round < ROUNDS; round++) {
        const published_round *want = &k_rounds[round];
        print_message("round %d\n", round + 1);

        for (int i = 0; i < OUTS; i++)
            assert_int_equal(mha_pcg32_next(&rng), want->out[i]);

        mha_pcg32_advance(&rng, (uint64_t)0 - 6u); /* "Again": back by 6 */
        for (int i = 0; i < OUTS; i++)
            assert_int_equal(mha_pcg32_next(&rng), want->out[i]);

        char coins[COINS + 1];
        for (int i = 0; i < COINS; i++)
            coins[i] = draw_bounded(&rng, 2) ? 'H' : 'T';
        coins[COINS] = '\0';
        assert_string_equal(coins, want->coins);

        char rolls[2 * ROLLS];
        for (int i = 0; i < ROLLS; i++) {
            rolls[2 * i] = (char)('1' + draw_bounded(&rng, 6));
            rolls[2 * i + 1] = ' ';
        }
        rolls[2 * ROLLS - 1] = '\0';
        assert_string_equal(rolls, want->rolls);

        int cards[CARDS];
        for (int i = 0; i < CARDS; i++)
            cards[i] = i;
        for (uint32_t i = CARDS; i > 1; i--) {
            uint32_t chosen = draw_bounded(&rng, i);
            int card = cards[chosen];
            cards[chosen] = cards[i - 1];
            cards[i - 1] = card;
        }
        /* The deck must be a permutation whatever the draws were. */
        int seen[CARDS] = {0};
        for (int i = 0; i < CARDS; i++) {
            assert_in_range(cards[i], 0, CARDS - 1);
            seen[cards[i]]++;
        }
        for (int i = 0; i < CARDS; i++)
            assert_int_equal(seen[i], 1);
        char deck[3 * CARDS];
        for (int i = 0; i < CARDS; i++) {
            deck[3 * i] = k_rank[cards[i] / SUITS];
            deck[3 * i + 1] = k_suit[cards[i] % SUITS];
            deck[3 * i + 2] = ' ';
        }
        deck[3 * CARDS - 1] = '\0';
        assert_string_equal(deck, want->cards);
    }
}

/* advance(10^6) lands on the same state as 10^6 single steps (also from a
 * second, unrelated stream, so inc enters the jump correctly). */
static void pcg32_advance_million_equals_steps(void **unused)
{
    (void)unused;
    const uint64_t seeds[2][2] = {{42u, 54u}, {0x853c49e6748fea9bull, 0xda3e39cb94b95bdbull}};
    for (int s = 0; s < 2; s++) {
        mha_pcg32 stepped, jumped;
        mha_pcg32_seed(&stepped, seeds[s][0], seeds[s][1]);
        jumped = stepped;
        for (uint32_t i = 0; i < 1000000u; i++)
            (void)mha_pcg32_next(&stepped);
        mha_pcg32_advance(&jumped, 1000000u);
        assert_int_equal(jumped.state, stepped.state);
        assert_int_equal(jumped.inc, stepped.inc);
        assert_int_equal(mha_pcg32_next(&jumped), mha_pcg32_next(&stepped));
    }
}

/* advance(2^32) from the (42, 54) seed gives state 0xbe1b96272c2e03f8 and next
 * output 0xee687386 (brute-force reference values). */
static void pcg32_advance_2_pow_32(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 42u, 54u);
    mha_pcg32_advance(&rng, (uint64_t)1 << 32);
    assert_int_equal(rng.state, 0xbe1b96272c2e03f8ull);
    assert_int_equal(rng.inc, 0x6dull);
    assert_int_equal(mha_pcg32_next(&rng), 0xee687386u);
}

/* advance((uint64_t)−k) after k steps returns to the start state, for several k
 * (0 and 1 included), and advance(0) changes nothing. */
static void pcg32_advance_negative_goes_back(void **unused)
{
    (void)unused;
    const uint64_t ks[] = {0u, 1u, 2u, 6u, 63u, 64u, 1000u, 123457u};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        mha_pcg32 rng, start;
        mha_pcg32_seed(&rng, 7u + t, 3u * t + 1u);
        start = rng;
        uint32_t first = mha_pcg32_next(&rng);
        rng = start;
        for (uint64_t i = 0; i < ks[t]; i++)
            (void)mha_pcg32_next(&rng);
        mha_pcg32_advance(&rng, (uint64_t)0 - ks[t]);
        assert_int_equal(rng.state, start.state);
        assert_int_equal(rng.inc, start.inc);
        assert_int_equal(mha_pcg32_next(&rng), first);
    }
    /* A long jump forward and back again. */
    mha_pcg32 rng, start;
    mha_pcg32_seed(&rng, 42u, 54u);
    start = rng;
    mha_pcg32_advance(&rng, 0x0123456789abcdefull);
    assert_true(rng.state != start.state);
    mha_pcg32_advance(&rng, (uint64_t)0 - 0x0123456789abcdefull);
    assert_int_equal(rng.state, start.state);
}

/* The first (42, 54) output 0xa15c02b7 becomes the float 0.630310178, i.e. exactly
 * (0xa15c02b7 >> 8)·2^-24. */
static void pcg32_float_of_first_output(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 42u, 54u);
    float f = mha_pcg32_float(&rng);
    assert_close(f, 0.630310178, 5e-9, 0.0);
    assert_true((double)f == (double)(0xa15c02b7u >> 8) * 0x1.0p-24);
    /* mha_pcg32_float consumed exactly one output. */
    assert_int_equal(mha_pcg32_next(&rng), 0x7b47f409u);
}

/* A state whose XSH-RR output is 0xffffffff: rot = old >> 59 = 0 and bits 27..58 of
 * (old >> 18) ^ old all set, which bits 41..58 of old set and 59..63 clear give. */
static const uint64_t k_all_ones_state = ((((uint64_t)1 << 18) - 1u) << 41);

/* The largest outputs still give float < 1 and double < 1 (a hand-set state that
 * outputs 0xffffffff, twice in a row for the double): 1 − 2^-24 and 1 − 2^-53. */
static void pcg32_float_double_below_one_at_max_output(void **unused)
{
    (void)unused;
    const uint64_t mult = 6364136223846793005ull;
    mha_pcg32 rng = {k_all_ones_state, 1u}, probe = rng;
    assert_int_equal(mha_pcg32_next(&probe), 0xffffffffu); /* premise */
    float f = mha_pcg32_float(&rng);
    assert_true(f < 1.0f);
    assert_true(f == 1.0f - 0x1.0p-24f);

    /* Second state = first | 1 (still outputs 0xffffffff; the low bits do not reach
     * the output); inc chosen so one step goes there. inc is odd because the first
     * state is even. */
    uint64_t s1 = k_all_ones_state, s2 = k_all_ones_state | 1u;
    mha_pcg32 rng2 = {s1, s2 - s1 * mult};
    assert_int_equal(rng2.inc & 1u, 1u);
    probe = rng2;
    assert_int_equal(mha_pcg32_next(&probe), 0xffffffffu); /* premise */
    assert_int_equal(mha_pcg32_next(&probe), 0xffffffffu); /* premise */
    double d = mha_pcg32_double(&rng2);
    assert_true(d < 1.0);
    assert_true(d == 1.0 - 0x1.0p-53);
    assert_int_equal(rng2.state, probe.state); /* consumed exactly two outputs */
}

/* Over 10^5 draws each, floats and doubles stay in [0, 1), their means are 1/2, and
 * the state zero output 0 gives exactly 0. */
static void pcg32_float_double_range(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 2024u, 11u);
    enum { N = 100000 };
    double sum_f = 0.0, sum_d = 0.0;
    for (int i = 0; i < N; i++) {
        float f = mha_pcg32_float(&rng);
        double d = mha_pcg32_double(&rng);
        assert_true(f >= 0.0f && f < 1.0f);
        assert_true(d >= 0.0 && d < 1.0);
        sum_f += f;
        sum_d += d;
    }
    /* sd of the mean = sqrt(1/12 / N) ≈ 9.1e-4; allow 5 sd. */
    assert_close(sum_f / N, 0.5, 4.6e-3, 0.0);
    assert_close(sum_d / N, 0.5, 4.6e-3, 0.0);

    mha_pcg32 zero = {0u, 1u}; /* old state 0 outputs 0 */
    assert_true(mha_pcg32_float(&zero) == 0.0f);
    /* states 0 then 1 (= 0·a + 1) both output 0, so the double is exactly 0 */
    mha_pcg32 zd = {0u, 1u}, zprobe = zd;
    assert_int_equal(mha_pcg32_next(&zprobe), 0u);
    assert_int_equal(mha_pcg32_next(&zprobe), 0u);
    assert_true(mha_pcg32_double(&zd) == 0.0);
}

/* bound == 0 or out == NULL returns −1 (MHA_EINVAL), leaves *out alone and draws
 * nothing (state unchanged). */
static void pcg32_bounded_invalid_draws_nothing(void **unused)
{
    (void)unused;
    mha_pcg32 rng, before;
    mha_pcg32_seed(&rng, 42u, 54u);
    before = rng;
    uint32_t out = 0xdeadbeefu;
    assert_int_equal(mha_pcg32_bounded(&rng, 0u, &out), -1);
    assert_int_equal(out, 0xdeadbeefu);
    assert_int_equal(rng.state, before.state);
    assert_int_equal(rng.inc, before.inc);
    assert_int_equal(mha_pcg32_bounded(&rng, 6u, NULL), -1);
    assert_int_equal(mha_pcg32_bounded(&rng, 0u, NULL), -1);
    assert_int_equal(rng.state, before.state);
    assert_int_equal(rng.inc, before.inc);
    /* and the generator still gives the published first output */
    assert_int_equal(mha_pcg32_next(&rng), 0xa15c02b7u);
}

/* Pearson chi-square of counts[k] against a uniform expectation total/k. */
static double chi_square_uniform(const uint32_t *counts, size_t bins, double total)
{
    double expect = total / (double)bins, chi2 = 0.0;
    for (size_t k = 0; k < bins; k++) {
        double d = (double)counts[k] - expect;
        chi2 += d * d / expect;
    }
    return chi2;
}

/* Bounded draws are in range and uniform: 6000 die rolls (5 dof) and 3000 draws
 * with bound 3·2^30 binned in thirds (2 dof) pass chi-square at p = 0.001. The
 * second bound is where plain r % bound is badly biased (the first third would get
 * half the mass, chi-square ≈ 375), so it tests the rejection threshold. */
static void pcg32_bounded_range_and_chi_square(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 12345u, 678u);

    enum { N_DIE = 6000, N_BIG = 3000 };
    uint32_t die[6] = {0};
    for (int i = 0; i < N_DIE; i++)
        die[draw_bounded(&rng, 6u)]++;
    double chi_die = chi_square_uniform(die, 6, N_DIE);
    print_message("die chi-square %.3f (5 dof, p=0.001 critical 20.515)\n", chi_die);
    assert_true(chi_die < 20.515);

    const uint32_t big = 3u << 30; /* 0xC0000000 */
    uint32_t thirds[3] = {0};
    for (int i = 0; i < N_BIG; i++)
        thirds[draw_bounded(&rng, big) / (1u << 30)]++;
    double chi_big = chi_square_uniform(thirds, 3, N_BIG);
    print_message("bound 3*2^30 chi-square %.3f (2 dof, p=0.001 critical 13.816)\n", chi_big);
    assert_true(chi_big < 13.816);

    /* bound 1 always gives 0; bound 2^32 − 1 stays in range. */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(draw_bounded(&rng, 1u), 0u);
        (void)draw_bounded(&rng, UINT32_MAX);
    }
}

/* mha_pcg32_double, exactly: ((a >> 5)·2^26 + (b >> 6))·2^-53 from the PCG authors'
 * first outputs for (42, 54) (0xa15c02b7 0x7b47f409 0xba1d3330 0x83d2f293), and for
 * the next 100 doubles from the pairs mha_pcg32_next gives a copy of the generator.
 * A changed shift or word order in either half changes these bits. */
static double double_of(uint32_t a, uint32_t b)
{
    return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * 0x1.0p-53;
}

static void pcg32_double_exact_values(void **unused)
{
    (void)unused;
    mha_pcg32 rng;
    mha_pcg32_seed(&rng, 42u, 54u);
    assert_true(mha_pcg32_double(&rng) == double_of(0xa15c02b7u, 0x7b47f409u));
    assert_true(mha_pcg32_double(&rng) == double_of(0xba1d3330u, 0x83d2f293u));
    assert_true(double_of(0xa15c02b7u, 0x7b47f409u) == 0x1.42b8055ed1fd0p-1);
    mha_pcg32 copy = rng;
    for (int k = 0; k < 100; k++) {
        const uint32_t a = mha_pcg32_next(&copy), b = mha_pcg32_next(&copy);
        assert_true(mha_pcg32_double(&rng) == double_of(a, b));
    }
    assert_true(rng.state == copy.state); /* two outputs per double */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pcg32_seed_state_and_inc),
        cmocka_unit_test(pcg32_published_rounds),
        cmocka_unit_test(pcg32_advance_million_equals_steps),
        cmocka_unit_test(pcg32_advance_2_pow_32),
        cmocka_unit_test(pcg32_advance_negative_goes_back),
        cmocka_unit_test(pcg32_float_of_first_output),
        cmocka_unit_test(pcg32_float_double_below_one_at_max_output),
        cmocka_unit_test(pcg32_float_double_range),
        cmocka_unit_test(pcg32_double_exact_values),
        cmocka_unit_test(pcg32_bounded_invalid_draws_nothing),
        cmocka_unit_test(pcg32_bounded_range_and_chi_square),
    };
    return cmocka_run_group_tests_name("pcg32", tests, NULL, NULL);
}
