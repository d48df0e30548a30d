/* ratelimit: a client-side token bucket and exponential backoff helpers.
 *
 * Nothing here reads a clock: every function takes the current monotonic
 * time in nanoseconds (uv_hrtime() in production, made-up values in tests),
 * so the arithmetic is deterministic and testable without sleeping.
 *
 * rl_bucket follows client-go's token-bucket limiter (golang.org/x/time/rate
 * underneath): the bucket holds up to `burst` tokens and refills continuously
 * at `qps` tokens a second. A request *reserves* a token at once and is told
 * how long to wait before it may start; the tokens of requests that are still
 * waiting are already spent, so N requests arriving together after the burst
 * are spread out exactly 1/qps apart.
 *
 * rl_exp_delay is the per-item exponential of the work queue (base * 2^n up
 * to a cap). rl_backoff is the reflector's jittered backoff with a reset
 * after a quiet period (client-go's exponential backoff manager: 800 ms,
 * factor 2, cap 30 s, jitter 1.0, reset after 2 min without a backoff).
 */
#ifndef OP_RATELIMIT_H
#define OP_RATELIMIT_H

#include <stdint.h>

#define RL_NS_PER_MS 1000000ull
#define RL_NS_PER_SEC 1000000000ull

/* ------------------------------------------------------------------ bucket */

/** Token bucket. All fields are private; the struct is public so that it
 *  can be embedded. */
typedef struct rl_bucket {
    double qps;    /* refill rate; <= 0 means "no limit" */
    double burst;  /* capacity (at least 1 when limiting) */
    double tokens; /* may go negative: tokens promised to waiting requests */
    uint64_t last; /* time (ns) at which tokens was last brought up to date */
} rl_bucket;

/** Start a bucket full (burst tokens) at time now. qps <= 0 disables the
 *  limiter (every reservation waits 0, as client-go's QPS -1); a burst below
 *  1 is raised to 1 so that the limiter can ever let a request through. */
void rl_bucket_init(rl_bucket *b, double qps, int burst, uint64_t now);

/** Reserve one token at time now and return how long (ns) the caller must
 *  wait before starting the request; 0 means "start now". The token is
 *  consumed even when the wait is not 0, so the caller must either wait and
 *  go or call rl_bucket_cancel(). A time earlier than the last call is
 *  treated as equal to it (monotonic clocks never go back, but be safe). */
uint64_t rl_bucket_reserve(rl_bucket *b, uint64_t now);

/** Take a token only if one is available now (client-go TryAccept).
 *  Returns 1 when taken, 0 when the caller would have to wait. */
int rl_bucket_try(rl_bucket *b, uint64_t now);

/** Give back a token reserved with rl_bucket_reserve() that will not be
 *  used (a request that was abandoned while waiting). */
void rl_bucket_cancel(rl_bucket *b, uint64_t now);

/** Tokens available at time now (negative while requests wait). */
double rl_bucket_tokens(rl_bucket *b, uint64_t now);

/* ------------------------------------------------------ per-item backoff */

/** min(cap, base * 2^failures) in ns, without overflow for any failures. */
uint64_t rl_exp_delay(uint64_t base, uint64_t cap, unsigned failures);

/* ----------------------------------------------- jittered backoff manager */

/** Jittered exponential backoff with reset after a quiet period. Fields are
 *  private except as documented on rl_backoff_init. */
typedef struct rl_backoff {
    uint64_t initial; /* first delay (ns) */
    uint64_t cap;     /* the un-jittered delay never exceeds this */
    double factor;    /* growth per step (>= 1) */
    double jitter;    /* each delay d becomes d + random[0,1) * jitter * d; 0 = none */
    uint64_t reset;   /* quiet period (ns) after which the next delay starts over */
    uint64_t current; /* un-jittered delay the next step returns */
    uint64_t last;    /* time of the previous rl_backoff_next */
    int have_last;
    uint64_t rng; /* xorshift state; seeded randomly, tests may overwrite */
} rl_backoff;

/** Configure a backoff. The first call to rl_backoff_next returns initial
 *  (plus jitter), and every later call factor times the previous one, up to
 *  cap; with jitter j a delay d is returned as a value in [d, d*(1+j)), so a
 *  jittered delay may exceed cap by up to j*cap (as client-go's). When reset
 *  ns or more passed since the previous rl_backoff_next, the sequence starts
 *  over at initial. reset == 0 never resets automatically. */
void rl_backoff_init(rl_backoff *b, uint64_t initial, uint64_t cap, double factor, double jitter,
                     uint64_t reset);

/** The reflector's defaults: 800 ms, x2, cap 30 s, jitter 1.0, reset 2 min. */
void rl_backoff_init_reflector(rl_backoff *b);

/** The delay (ns) to wait after a failure observed at time now. */
uint64_t rl_backoff_next(rl_backoff *b, uint64_t now);

/** Start over at the initial delay (after a success the caller trusts). */
void rl_backoff_reset(rl_backoff *b);

/** A random value in [0, 1) from the backoff's generator (exposed for tests). */
double rl_backoff_rand(rl_backoff *b);

#endif
