/* list: intrusive circular doubly linked lists (libuv's queue.h idea).
 *
 * The node lives inside the element; no list operation allocates. A removed
 * node points to itself, so list_is_linked() answers "is it in a list?" and
 * lets callers de-duplicate enqueues without a side table.
 */
#ifndef OP_LIST_H
#define OP_LIST_H

#include <assert.h>
#include <stddef.h>

#include "core/mem.h"

typedef struct list_node {
    struct list_node *next;
    struct list_node *prev;
} list_node;

static inline void list_init(list_node *n)
{
    n->next = n;
    n->prev = n;
}

static inline int list_empty(const list_node *h)
{
    return h->next == h;
}

/** True when n is linked into some list (a node must be list_init'ed first). */
static inline int list_is_linked(const list_node *n)
{
    return n->next != n;
}

/* Inserting a node that is still in a list would corrupt both lists: n is
 * either fresh (zeroed or list_init'ed) or removed. */
static inline void list_insert_after(list_node *pos, list_node *n)
{
    assert(n->next == NULL || n->next == n);
    assert(pos->next->prev == pos);
    n->next = pos->next;
    n->prev = pos;
    pos->next->prev = n;
    pos->next = n;
}

static inline void list_insert_tail(list_node *h, list_node *n)
{
    list_insert_after(h->prev, n);
}

static inline void list_insert_head(list_node *h, list_node *n)
{
    list_insert_after(h, n);
}

static inline void list_remove(list_node *n)
{
    assert(n->next->prev == n && n->prev->next == n);
    n->prev->next = n->next;
    n->next->prev = n->prev;
    list_init(n);
}

static inline list_node *list_first(const list_node *h)
{
    return h->next == h ? NULL : h->next;
}

/** Move every node of src to the tail of dst; src becomes empty. */
static inline void list_splice_tail(list_node *dst, list_node *src)
{
    if (list_empty(src))
        return;
    assert(src != dst);
    src->next->prev = dst->prev;
    dst->prev->next = src->next;
    src->prev->next = dst;
    dst->prev = src->prev;
    list_init(src);
}

#define list_entry(ptr, type, member) container_of(ptr, type, member)

#define list_foreach(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

/* Safe against removal of pos inside the loop body. */
#define list_foreach_safe(pos, tmp, head)                                                                    \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
