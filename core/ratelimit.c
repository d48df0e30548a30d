#include "core/ratelimit.h"

#include <assert.h>
#include <math.h>

#include "core/crypto.h"

/* ------------------------------------------------------------------ bucket */

void rl_bucket_init(rl_bucket *b, double qps, int burst, uint64_t now)
{
    b->qps = qps > 0 ? qps : 0;
    b->burst = burst < 1 ? 1 : (double)burst;
    b->tokens = b->burst;
    b->last = now;
}

/* Bring the token count up to date: refill for the time since the last call,
 * never above the burst. A clock that went back refills nothing. */
static void advance(rl_bucket *b, uint64_t now)
{
    if (now <= b->last)
        return;
    double add = (double)(now - b->last) / (double)RL_NS_PER_SEC * b->qps;
    b->tokens += add;
    if (b->tokens > b->burst)
        b->tokens = b->burst;
    b->last = now;
    assert(b->tokens <= b->burst);
}

uint64_t rl_bucket_reserve(rl_bucket *b, uint64_t now)
{
    if (b->qps <= 0)
        return 0;
    advance(b, now);
    b->tokens -= 1;
    if (b->tokens >= 0)
        return 0;
    /* The deficit is paid back at qps tokens a second. */
    return (uint64_t)llround(-b->tokens / b->qps * (double)RL_NS_PER_SEC);
}

int rl_bucket_try(rl_bucket *b, uint64_t now)
{
    if (b->qps <= 0)
        return 1;
    advance(b, now);
    if (b->tokens < 1)
        return 0;
    b->tokens -= 1;
    return 1;
}

void rl_bucket_cancel(rl_bucket *b, uint64_t now)
{
    if (b->qps <= 0)
        return;
    advance(b, now);
    b->tokens += 1;
    if (b->tokens > b->burst)
        b->tokens = b->burst;
}

double rl_bucket_tokens(rl_bucket *b, uint64_t now)
{
    if (b->qps <= 0)
        return b->burst;
    advance(b, now);
    return b->tokens;
}

/* ------------------------------------------------------ per-item backoff */

uint64_t rl_exp_delay(uint64_t base, uint64_t cap, unsigned failures)
{
    if (base == 0)
        return 0;
    /* base << failures overflows once failures reaches the number of
     * leading zero bits of base; anything that large is past the cap. */
    if (failures >= 64 || base > (UINT64_MAX >> failures))
        return cap;
    uint64_t d = base << failures;
    assert(d >> failures == base); /* the check above ruled out overflow */
    return d > cap ? cap : d;
}

/* ----------------------------------------------- jittered backoff manager */

void rl_backoff_init(rl_backoff *b, uint64_t initial, uint64_t cap, double factor, double jitter,
                     uint64_t reset)
{
    b->initial = initial;
    b->cap = cap < initial ? initial : cap;
    b->factor = factor < 1 ? 1 : factor;
    b->jitter = jitter < 0 ? 0 : jitter;
    b->reset = reset;
    b->current = b->initial;
    b->last = 0;
    b->have_last = 0;
    random_bytes(&b->rng, sizeof(b->rng));
    if (b->rng == 0)
        b->rng = 0x9e3779b97f4a7c15ull; /* xorshift must not start at 0 */
}

void rl_backoff_init_reflector(rl_backoff *b)
{
    rl_backoff_init(b, 800 * RL_NS_PER_MS, 30 * RL_NS_PER_SEC, 2.0, 1.0, 120 * RL_NS_PER_SEC);
}

double rl_backoff_rand(rl_backoff *b)
{
    /* xorshift64*: plenty for spreading reconnects, and cheap. */
    uint64_t x = b->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    b->rng = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0; /* / 2^53 */
}

void rl_backoff_reset(rl_backoff *b)
{
    b->current = b->initial;
    b->have_last = 0;
}

uint64_t rl_backoff_next(rl_backoff *b, uint64_t now)
{
    /* As client-go's manager: the quiet period is measured from the start
     * of the previous backoff, so a failure after a long healthy stretch is
     * treated as the first one again. */
    if (b->have_last && b->reset && now >= b->last && now - b->last >= b->reset)
        b->current = b->initial;
    b->last = now;
    b->have_last = 1;

    uint64_t d = b->current;
    double grown = (double)b->current * b->factor;
    b->current = grown >= (double)b->cap ? b->cap : (uint64_t)grown;
    /* The un-jittered delay grows from initial and never passes cap. */
    assert(b->current >= d && b->current <= b->cap && d >= b->initial);

    if (b->jitter > 0)
        d += (uint64_t)(rl_backoff_rand(b) * b->jitter * (double)d);
    return d;
}
