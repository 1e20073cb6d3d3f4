/* pt_walks.c: walks of a CallTree: the pre-order, depths, the outermost nodes of a
 * function, the nodes of a function, the flame graph's search share and the call tree
 * view's search order.  Stacks are
 * popped as the Python model popped them (the last child first), so orders and float
 * sums are the same. */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* preorder(tree) -> array('i'): every node but the root, parents before children,
 * children in order.  Not async-signal-safe. */
PyObject *pt_py_preorder(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O:preorder", &obj))
        return NULL;
    pt_tree t;
    pt_shape s;
    PyObject *result = NULL;
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    if (pt_shape_get(&s, &t, 1) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    const int32_t *first = PT_I32P(&s.first), *next = PT_I32P(&s.next);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)s.n);
    pt_vec ancestors = {0};
    Py_ssize_t len = 0;
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t node = first[0];
    while (node >= 0) {
        if (len >= s.n) {
            PyErr_SetString(PyExc_ValueError, "CallTree: children links form a cycle");
            goto done;
        }
        out[len++] = node;
        node = pt_preorder_next(first, next, &ancestors, node);
        if (node == -2)
            goto done;
    }
    result = pt_array_new(PT_I32, out, len);
done:
    free(out);
    pt_vec_free(&ancestors);
    pt_shape_release(&s);
    pt_tree_close(&t);
    return result;
}

/* max_depth(tree) -> depth of the deepest node (0 for a tree of the root alone).
 * Not async-signal-safe. */
PyObject *pt_py_max_depth(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O:max_depth", &obj))
        return NULL;
    pt_tree t;
    pt_shape s;
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    if (pt_shape_get(&s, &t, 0) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    int32_t *depth = calloc((size_t)s.n, sizeof(int32_t));
    int32_t deepest = 0;
    PyObject *result = NULL;
    if (depth == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int32_t *up = PT_I32P(&s.parents);
    for (Py_ssize_t i = 1; i < s.n; i++) {
        if (up[i] < 0 || up[i] >= i) {
            PyErr_Format(PyExc_ValueError, "node %zd: parent %d is not an earlier node", i, up[i]);
            goto done;
        }
        depth[i] = depth[up[i]] + 1;
        if (depth[i] > deepest)
            deepest = depth[i];
    }
    result = PyLong_FromLong(deepest);
done:
    free(depth);
    pt_shape_release(&s);
    pt_tree_close(&t);
    return result;
}

/* Nodes whose frame `mask` flags (frame ids past its end: no).  Async-signal-safe. */
static inline int pt_masked(const pt_col *mask, int32_t frame) {
    return frame >= 0 && frame < mask->len && PT_U8P(mask)[frame];
}

/* outermost_of(tree, mask) -> array('i'): the nodes of the frames `mask` flags with no
 * flagged ancestor, in the order of a stack walk from the root's children (the last
 * pushed first; a flagged node's subtree is not entered).  Not async-signal-safe. */
PyObject *pt_py_outermost_of(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *mask_obj;
    if (!PyArg_ParseTuple(args, "OO:outermost_of", &obj, &mask_obj))
        return NULL;
    pt_tree t;
    pt_shape s;
    pt_col mask;
    pt_vec stack = {0}, out = {0};
    PyObject *result = NULL;
    if (pt_col_get(&mask, mask_obj, PT_U8, 0, "mask") < 0)
        return NULL;
    if (pt_tree_open(&t, obj, 0) < 0) {
        pt_col_release(&mask);
        return NULL;
    }
    if (pt_shape_get(&s, &t, 1) < 0)
        goto close;
    const int32_t *first = PT_I32P(&s.first), *next = PT_I32P(&s.next), *fr = PT_I32P(&s.frames);
    for (int32_t c = first[0]; c >= 0; c = next[c])
        if (pt_vec_push(&stack, c) < 0)
            goto done;
    while (stack.len) {
        int32_t node = stack.items[--stack.len];
        if (pt_masked(&mask, fr[node])) {
            if (pt_vec_push(&out, node) < 0)
                goto done;
            continue;
        }
        for (int32_t c = first[node]; c >= 0; c = next[c])
            if (pt_vec_push(&stack, c) < 0)
                goto done;
    }
    result = pt_array_new(PT_I32, out.items, out.len);
done:
    pt_shape_release(&s);
close:
    pt_tree_close(&t);
    pt_col_release(&mask);
    pt_vec_free(&stack);
    pt_vec_free(&out);
    return result;
}

/* nodes_matching(tree, mask) -> array('i'): every node whose frame `mask` flags, in
 * pre-order.  Not async-signal-safe. */
PyObject *pt_py_nodes_matching(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *mask_obj;
    if (!PyArg_ParseTuple(args, "OO:nodes_matching", &obj, &mask_obj))
        return NULL;
    PyObject *order_args = Py_BuildValue("(O)", obj);
    PyObject *order = order_args == NULL ? NULL : pt_py_preorder(NULL, order_args);
    Py_XDECREF(order_args);
    if (order == NULL)
        return NULL;
    pt_col nodes, mask, frames;
    PyObject *frames_obj = PyObject_GetAttrString(obj, "frames");
    PyObject *result = NULL;
    pt_vec out = {0};
    if (frames_obj == NULL) {
        Py_DECREF(order);
        return NULL;
    }
    if (pt_col_get(&nodes, order, PT_I32, 0, "order") == 0) {
        if (pt_col_get(&mask, mask_obj, PT_U8, 0, "mask") == 0) {
            if (pt_col_get(&frames, frames_obj, PT_I32, 0, "frames") == 0) {
                int ok = 1;
                for (Py_ssize_t i = 0; ok && i < nodes.len; i++) {
                    int32_t node = PT_I32P(&nodes)[i];
                    if (pt_masked(&mask, PT_I32P(&frames)[node]))
                        ok = pt_vec_push(&out, node) == 0;
                }
                if (ok)
                    result = pt_array_new(PT_I32, out.items, out.len);
                pt_col_release(&frames);
            }
            pt_col_release(&mask);
        }
        pt_col_release(&nodes);
    }
    pt_vec_free(&out);
    Py_DECREF(frames_obj);
    Py_DECREF(order);
    return result;
}

/* share_walk(tree, totals, metric, matches, stack, budget) -> (total, stack): up to
 * `budget` steps of flame.ShareWalk: pop a node; a matching frame adds its total (when
 * positive) and ends that path, else its children are pushed in order.  `stack` is an
 * array('i') of node ids (popped from the end); the one left is returned.
 * Not async-signal-safe. */
PyObject *pt_py_share_walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *totals, *matches_obj, *stack_obj;
    Py_ssize_t metric;
    long long budget;
    if (!PyArg_ParseTuple(args, "OOnOOL:share_walk", &obj, &totals, &metric, &matches_obj,
                          &stack_obj, &budget))
        return NULL;
    if (!PyList_Check(totals) || metric < 0 || metric >= PyList_Size(totals)) {
        PyErr_SetString(PyExc_IndexError, "share_walk: no such metric");
        return NULL;
    }
    pt_tree t;
    pt_shape s;
    pt_col matches = {0}, total = {0}, start = {0};
    pt_vec stack = {0};
    PyObject *result = NULL;
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    if (pt_shape_get(&s, &t, 1) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    if (pt_col_get(&matches, matches_obj, PT_U8, 0, "matches") < 0 ||
        pt_col_get(&total, PyList_GetItem(totals, metric), PT_F64, 0, "totals") < 0 ||
        pt_col_get(&start, stack_obj, PT_I32, 0, "stack") < 0)
        goto done;
    for (Py_ssize_t i = 0; i < start.len; i++)
        if (pt_vec_push(&stack, PT_I32P(&start)[i]) < 0)
            goto done;
    pt_col_release(&start);
    const int32_t *first = PT_I32P(&s.first), *next = PT_I32P(&s.next), *fr = PT_I32P(&s.frames);
    double sum = 0.0;
    while (stack.len && budget > 0) {
        budget--;
        int32_t node = stack.items[--stack.len];
        if (node < 0 || node >= s.n || node >= total.len) {
            PyErr_SetString(PyExc_IndexError, "share_walk: not a node of the tree");
            goto done;
        }
        int32_t frame = fr[node];
        if (frame < 0 || frame >= matches.len) {
            PyErr_SetString(PyExc_IndexError, "share_walk: frame id past the matches");
            goto done;
        }
        if (PT_U8P(&matches)[frame]) {
            double value = PT_F64P(&total)[node];
            sum += value > 0 ? value : 0.0;
        } else {
            for (int32_t c = first[node]; c >= 0; c = next[c])
                if (pt_vec_push(&stack, c) < 0)
                    goto done;
        }
    }
    PyObject *left = pt_array_new(PT_I32, stack.items, stack.len);
    if (left != NULL)
        result = Py_BuildValue("(dN)", sum, left);
done:
    pt_col_release(&matches);
    pt_col_release(&total);
    pt_col_release(&start);
    pt_vec_free(&stack);
    pt_shape_release(&s);
    pt_tree_close(&t);
    return result;
}

/* The running sums of `neighbours`, one slot per key (a frame id, or -1 for the root),
 * slots in the order keys are first met.  Not async-signal-safe (malloc). */
typedef struct {
    int32_t *slot_of; /* key + 1 -> slot, or -1 */
    int64_t *keys, *calls;
    double *sums; /* slot * metrics + m */
    Py_ssize_t used, metrics;
} pt_table;

/* Add node `src`'s totals and calls under `key`, as views._accumulate: the first time a
 * copy, then sums.  Async-signal-safe (pure). */
static void pt_table_add(pt_table *tb, int64_t key, const pt_col *totals, const pt_col *calls,
                         Py_ssize_t src) {
    int32_t slot = tb->slot_of[key + 1];
    int64_t count = calls->held ? PT_I64P(calls)[src] : -1;
    if (slot < 0) {
        slot = tb->slot_of[key + 1] = (int32_t)tb->used++;
        tb->keys[slot] = key;
        for (Py_ssize_t m = 0; m < tb->metrics; m++)
            tb->sums[slot * tb->metrics + m] = PT_F64P(&totals[m])[src];
        tb->calls[slot] = count >= 0 ? count : -1;
        return;
    }
    for (Py_ssize_t m = 0; m < tb->metrics; m++)
        tb->sums[slot * tb->metrics + m] += PT_F64P(&totals[m])[src];
    if (count >= 0)
        tb->calls[slot] = tb->calls[slot] < 0 ? count : tb->calls[slot] + count;
}

/* neighbours(tree, totals, mask, callees) -> (keys, sums, calls): views.callers (callees
 * False) and views.callees.  Over the nodes of the frames `mask` flags, in pre-order:
 * each node's totals (`totals`, one column per metric) and call count under its parent's
 * frame (the root's: -1), or each child's under the child's frame (of children sharing
 * a frame, the last one, where the first one was: what a dict of them keeps).  Keys in
 * the order first met (array('q')), the sums per metric aligned with them (array('d')
 * each), the summed known calls (array('q'), -1: none known).  Not async-signal-safe. */
PyObject *pt_py_neighbours(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *totals_obj, *mask_obj;
    int callees;
    if (!PyArg_ParseTuple(args, "OOOp:neighbours", &obj, &totals_obj, &mask_obj, &callees))
        return NULL;
    if (!PyList_Check(totals_obj) || PyList_Size(totals_obj) > 64) {
        PyErr_SetString(PyExc_TypeError, "neighbours: totals must be a list of columns");
        return NULL;
    }
    pt_tree t;
    pt_shape s;
    pt_col mask = {0}, calls = {0}, totals[64];
    Py_ssize_t metrics = PyList_Size(totals_obj), got = 0;
    pt_table tb = {0};
    pt_vec ancestors = {0};
    int32_t *last_of = NULL;
    PyObject *result = NULL;
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    if (pt_shape_get(&s, &t, 1) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    if (pt_col_get(&mask, mask_obj, PT_U8, 0, "mask") < 0 ||
        (t.calls != NULL && pt_col_get(&calls, t.calls, PT_I64, 0, "calls") < 0))
        goto done;
    for (; got < metrics; got++)
        if (pt_list_col(&totals[got], totals_obj, got, 0, "totals") < 0)
            goto done;
        else if (totals[got].len < s.n) {
            got++;
            PyErr_SetString(PyExc_ValueError, "neighbours: a total column is too short");
            goto done;
        }
    if (calls.held && calls.len < s.n) {
        PyErr_SetString(PyExc_ValueError, "neighbours: the calls column is too short");
        goto done;
    }
    const int32_t *up = PT_I32P(&s.parents), *fr = PT_I32P(&s.frames);
    const int32_t *first = PT_I32P(&s.first), *next = PT_I32P(&s.next);
    int32_t largest = 0;
    for (Py_ssize_t i = 1; i < s.n; i++) {
        if (fr[i] < 0) {
            PyErr_Format(PyExc_ValueError, "node %zd has no frame", i);
            goto done;
        }
        if (fr[i] > largest)
            largest = fr[i];
    }
    size_t keys = (size_t)largest + 2;
    tb.metrics = metrics;
    tb.slot_of = malloc(sizeof(int32_t) * keys);
    tb.keys = malloc(sizeof(int64_t) * keys);
    tb.calls = malloc(sizeof(int64_t) * keys);
    tb.sums = malloc(sizeof(double) * keys * (size_t)(metrics ? metrics : 1));
    last_of = malloc(sizeof(int32_t) * keys);
    if (tb.slot_of == NULL || tb.keys == NULL || tb.calls == NULL || tb.sums == NULL ||
        last_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memset(tb.slot_of, 0xff, sizeof(int32_t) * keys);
    memset(last_of, 0xff, sizeof(int32_t) * keys);
    int32_t node = first[0];
    while (node >= 0) {
        if (pt_masked(&mask, fr[node])) {
            if (!callees) {
                pt_table_add(&tb, up[node] > 0 ? fr[up[node]] : -1, totals, &calls, node);
            } else {
                for (int32_t c = first[node]; c >= 0; c = next[c])
                    last_of[fr[c]] = c;
                for (int32_t c = first[node]; c >= 0; c = next[c])
                    if (last_of[fr[c]] >= 0) {
                        pt_table_add(&tb, fr[c], totals, &calls, last_of[fr[c]]);
                        last_of[fr[c]] = -1;
                    }
            }
        }
        node = pt_preorder_next(first, next, &ancestors, node);
        if (node == -2)
            goto done;
    }
    PyObject *key_out = pt_array_new(PT_I64, tb.keys, tb.used), *sums_out = PyList_New(0);
    PyObject *calls_out = NULL;
    double *column = malloc(sizeof(double) * (size_t)(tb.used ? tb.used : 1));
    int ok = key_out != NULL && sums_out != NULL && column != NULL;
    for (Py_ssize_t m = 0; ok && m < metrics; m++) {
        for (Py_ssize_t k = 0; k < tb.used; k++)
            column[k] = tb.sums[k * metrics + m];
        PyObject *a = pt_array_new(PT_F64, column, tb.used);
        ok = a != NULL && PyList_Append(sums_out, a) == 0;
        Py_XDECREF(a);
    }
    free(column);
    if (ok && (calls_out = pt_array_new(PT_I64, tb.calls, tb.used)) != NULL)
        result = Py_BuildValue("(NNN)", key_out, sums_out, calls_out);
    else {
        if (column == NULL)
            PyErr_NoMemory();
        Py_XDECREF(key_out);
        Py_XDECREF(sums_out);
    }
done:
    for (Py_ssize_t m = 0; m < got; m++)
        pt_col_release(&totals[m]);
    pt_col_release(&mask);
    pt_col_release(&calls);
    pt_shape_release(&s);
    pt_tree_close(&t);
    pt_vec_free(&ancestors);
    free(tb.slot_of);
    free(tb.keys);
    free(tb.calls);
    free(tb.sums);
    free(last_of);
    return result;
}

/* A child as display_order sorts siblings: its total, then its place among them (the
 * Python model's stable sort by descending total). */
typedef struct {
    double total;
    int32_t node, place;
} pt_ranked;

/* qsort order of pt_ranked: larger totals first, ties in sibling order.  Async-signal-safe
 * (pure). */
static int pt_ranked_cmp(const void *a, const void *b) {
    const pt_ranked *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return (x->place > y->place) - (x->place < y->place);
}

/* display_order(tree, totals, metric, start, mask, max_depth) -> array('i'): the nodes
 * below `start` whose frame `mask` flags, in the order a call tree view shows them:
 * depth first, siblings by descending total of `metric` (ties in sibling order); a node
 * `max_depth` levels below `start` is listed but its children are not.
 * Not async-signal-safe. */
PyObject *pt_py_display_order(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *totals, *mask_obj;
    Py_ssize_t metric, start, max_depth;
    if (!PyArg_ParseTuple(args, "OOnnOn:display_order", &obj, &totals, &metric, &start,
                          &mask_obj, &max_depth))
        return NULL;
    if (!PyList_Check(totals) || metric < 0 || metric >= PyList_Size(totals)) {
        PyErr_SetString(PyExc_IndexError, "display_order: no such metric");
        return NULL;
    }
    pt_tree t;
    pt_shape s;
    pt_col mask = {0}, total = {0};
    pt_vec stack = {0}, out = {0};
    pt_ranked *kids = NULL;
    Py_ssize_t kids_cap = 0;
    PyObject *result = NULL;
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    if (pt_shape_get(&s, &t, 1) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    if (pt_col_get(&mask, mask_obj, PT_U8, 0, "mask") < 0 ||
        pt_col_get(&total, PyList_GetItem(totals, metric), PT_F64, 0, "totals") < 0)
        goto done;
    if (start < 0 || start >= s.n || total.len < s.n) {
        PyErr_SetString(PyExc_IndexError, "display_order: not a node of the tree");
        goto done;
    }
    const int32_t *first = PT_I32P(&s.first), *next = PT_I32P(&s.next), *fr = PT_I32P(&s.frames);
    const double *tot = PT_F64P(&total);
    if (pt_push2(&stack, (int32_t)start, 0) < 0)
        goto done;
    int is_start = 1;
    Py_ssize_t visited = 0;
    while (stack.len) {
        int32_t depth = stack.items[--stack.len];
        int32_t node = stack.items[--stack.len];
        if (++visited > s.n) {
            PyErr_SetString(PyExc_ValueError, "CallTree: children links form a cycle");
            goto done;
        }
        if (!is_start && pt_masked(&mask, fr[node]) && pt_vec_push(&out, node) < 0)
            goto done;
        is_start = 0;
        if (depth >= max_depth)
            continue;
        Py_ssize_t k = 0;
        for (int32_t c = first[node]; c >= 0; c = next[c], k++) {
            if (k >= kids_cap) {
                Py_ssize_t cap = kids_cap ? 2 * kids_cap : 64;
                pt_ranked *grown = realloc(kids, sizeof(pt_ranked) * (size_t)cap);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                kids = grown, kids_cap = cap;
            }
            kids[k] = (pt_ranked){tot[c], c, (int32_t)k};
        }
        qsort(kids, (size_t)k, sizeof(pt_ranked), pt_ranked_cmp);
        while (k > 0) { /* the costliest pushed last: popped first */
            k--;
            if (pt_push2(&stack, kids[k].node, depth + 1) < 0)
                goto done;
        }
    }
    result = pt_array_new(PT_I32, out.items, out.len);
done:
    free(kids);
    pt_col_release(&mask);
    pt_col_release(&total);
    pt_vec_free(&stack);
    pt_vec_free(&out);
    pt_shape_release(&s);
    pt_tree_close(&t);
    return result;
}
