/* pt_commit.c: an operation's new nodes appended to a CallTree's columns and linked
 * (pt_tree_commit), and a tree's shape borrowed for a whole-tree pass (pt_shape_get).
 * The columns were opened by pt_index.c's pt_tree_open. */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* Cut `column` back to `items` (undoing a partial commit).  Not async-signal-safe. */
static void pt_truncate(PyObject *column, Py_ssize_t items) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    Py_ssize_t len = PySequence_Size(column);
    if (len > items)
        PySequence_DelSlice(column, items, len);
    PyErr_Clear();
    PyErr_Restore(type, value, trace);
}

/* Make the last_child column of a tree whose links were made without it (a read-only
 * tree gets a node: CallTree.from_columns) from first_child and next_sibling, and keep
 * it in CallTree._links.  0, or -1 with an exception.  Not async-signal-safe. */
static int pt_tree_need_last(pt_tree *t) {
    if (t->first == NULL || t->last != Py_None)
        return 0;
    pt_col cfirst, cnext, clast;
    if (pt_col_get(&cfirst, t->first, PT_I32, 0, "first_child") < 0)
        return -1;
    if (pt_col_get(&cnext, t->next, PT_I32, 0, "next_sibling") < 0) {
        pt_col_release(&cfirst);
        return -1;
    }
    Py_ssize_t n = cfirst.len;
    PyObject *last = pt_array_new(PT_I32, NULL, n), *links = NULL;
    int rc = -1;
    if (last != NULL && pt_col_get(&clast, last, PT_I32, 1, "last_child") == 0) {
        const int32_t *first = PT_I32P(&cfirst), *next = PT_I32P(&cnext);
        int32_t *tail = PT_I32P(&clast);
        for (Py_ssize_t p = 0; p < n; p++) {
            int32_t c = first[p];
            while (c >= 0 && c < n && next[c] >= 0)
                c = next[c];
            tail[p] = c < n ? c : -1;
        }
        pt_col_release(&clast);
        links = Py_BuildValue("(OOO)", t->first, last, t->next);
        rc = links != NULL && PyObject_SetAttrString(t->obj, "_links", links) == 0 ? 0 : -1;
    }
    pt_col_release(&cfirst);
    pt_col_release(&cnext);
    Py_XDECREF(links);
    if (rc == 0) {
        Py_DECREF(t->last);
        t->last = last;
    } else {
        Py_XDECREF(last);
    }
    return rc;
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_tree_commit(pt_tree *t, pt_nodes *nodes, PyObject *outer) {
    Py_ssize_t k = nodes->k, n0 = nodes->n0;
    if (k == 0)
        return 0;
    if (pt_tree_need_last(t) < 0)
        return -1;
    /* Every column the nodes go into, with its item size and fill byte. */
    PyObject *columns[64];
    const void *sources[64];
    Py_ssize_t sizes[64], olds[64];
    int count = 0;
    if (2 * t->n_metrics + 7 > 64) {
        PyErr_SetString(PyExc_ValueError, "CallTree: too many metrics");
        return -1;
    }
    uint8_t *zeros = calloc((size_t)k, 8), *ones = malloc((size_t)k * 8);
    if (zeros == NULL || ones == NULL) {
        free(zeros);
        free(ones);
        PyErr_NoMemory();
        return -1;
    }
    memset(ones, 0xff, (size_t)k * 8);
    columns[count] = t->parents, sources[count] = nodes->new_parents, sizes[count++] = 4;
    columns[count] = t->frames, sources[count] = nodes->new_frames, sizes[count++] = 4;
    for (Py_ssize_t m = 0; m < t->n_metrics; m++)
        columns[count] = PyList_GetItem(t->selfs, m), sources[count] = zeros, sizes[count++] = 8;
    if (t->totals != Py_None)
        for (Py_ssize_t m = 0; m < PyList_Size(t->totals); m++)
            columns[count] = PyList_GetItem(t->totals, m), sources[count] = zeros,
            sizes[count++] = 8;
    if (t->calls != NULL)
        columns[count] = t->calls, sources[count] = ones, sizes[count++] = 8;
    if (t->first != NULL) {
        columns[count] = t->first, sources[count] = ones, sizes[count++] = 4;
        columns[count] = t->last, sources[count] = ones, sizes[count++] = 4;
        columns[count] = t->next, sources[count] = ones, sizes[count++] = 4;
    }
    if (outer != NULL && outer != Py_None && nodes->keep_outer)
        columns[count] = outer, sources[count] = nodes->new_outer, sizes[count++] = 1;
    int done = 0, rc = 0;
    for (; done < count; done++) {
        olds[done] = PySequence_Size(columns[done]);
        if (olds[done] < 0 || pt_extend(columns[done], sources[done], sizes[done] * k) < 0) {
            rc = -1;
            break;
        }
    }
    free(zeros);
    free(ones);
    if (rc < 0) {
        for (int i = 0; i < done; i++)
            pt_truncate(columns[i], olds[i]);
        if (t->index != NULL)
            pt_index_clear(t->index);
        return -1;
    }
    if (t->index != NULL)
        pt_index_indexed(t->index, n0 + k);
    if (t->first == NULL)
        return 0; /* links are made from the parents when first read */
    pt_col cp, cfirst, clast, cnext;
    if (pt_col_get(&cp, t->parents, PT_I32, 0, "parents") < 0)
        return -1;
    if (pt_col_get(&cfirst, t->first, PT_I32, 1, "first_child") < 0) {
        pt_col_release(&cp);
        return -1;
    }
    if (pt_col_get(&clast, t->last, PT_I32, 1, "last_child") < 0) {
        pt_col_release(&cp);
        pt_col_release(&cfirst);
        return -1;
    }
    if (pt_col_get(&cnext, t->next, PT_I32, 1, "next_sibling") < 0) {
        pt_col_release(&cp);
        pt_col_release(&cfirst);
        pt_col_release(&clast);
        return -1;
    }
    int32_t *parents = PT_I32P(&cp), *first = PT_I32P(&cfirst), *last = PT_I32P(&clast),
            *next = PT_I32P(&cnext);
    for (Py_ssize_t i = n0; i < n0 + k; i++) {
        int32_t p = parents[i], tail = last[p];
        if (tail < 0)
            first[p] = (int32_t)i;
        else
            next[tail] = (int32_t)i;
        last[p] = (int32_t)i;
    }
    pt_col_release(&cp);
    pt_col_release(&cfirst);
    pt_col_release(&clast);
    pt_col_release(&cnext);
    return 0;
}

/* ---- a tree's shape, borrowed for a whole-tree pass --------------------------------- */

/* See pt_core.h.  Not async-signal-safe. */
void pt_shape_release(pt_shape *s) {
    pt_col_release(&s->parents);
    pt_col_release(&s->frames);
    pt_col_release(&s->first);
    pt_col_release(&s->next);
}

/* Not async-signal-safe (Python buffers). */
int pt_shape_get(pt_shape *s, pt_tree *t, int links) {
    memset(s, 0, sizeof *s);
    if (links && pt_tree_need_links(t) < 0)
        return -1;
    if (pt_col_get(&s->parents, t->parents, PT_I32, 0, "parents") < 0 ||
        pt_col_get(&s->frames, t->frames, PT_I32, 0, "frames") < 0 ||
        (links && (pt_col_get(&s->first, t->first, PT_I32, 0, "first_child") < 0 ||
                   pt_col_get(&s->next, t->next, PT_I32, 0, "next_sibling") < 0))) {
        pt_shape_release(s);
        return -1;
    }
    s->n = s->parents.len;
    if (s->frames.len != s->n || s->n < 1 ||
        (links && (s->first.len != s->n || s->next.len != s->n))) {
        pt_shape_release(s);
        PyErr_SetString(PyExc_ValueError, "CallTree: columns differ in length");
        return -1;
    }
    return 0;
}
