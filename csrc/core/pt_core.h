/* pt_core.h: the native core of proftui's data model (proftui.collectors.model._core).
 *
 * The CallTree (collectors/model/calltree.py) keeps its nodes in columns: array('i')
 * parents, frames, first_child, last_child, next_sibling; array('q') calls; lists of
 * array('d') selfs and (once computed) totals.  The functions here read and write
 * those columns through the buffer protocol, so the per-node and per-frame work of
 * the data path (inserting paths, folding trees, totals, per-function sums, derived
 * trees) runs in C while the model stays one set of Python arrays.
 *
 * Nothing here is async-signal-safe: it is front-end code that calls the Python C
 * API and malloc.  Every function expects the GIL held (invert, callers and fold release it
 * around their insertion loops, which touch C memory and borrowed buffers only).
 * Floating-point sums are done in the order the Python model defined them (and
 * without contraction, see setup.py's -ffp-contract=off), so results are
 * bit-identical to it.
 */
#ifndef PT_CORE_H
#define PT_CORE_H

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000 /* the stable ABI of Python 3.11 (setup.py sets it too) */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

/* Column kinds (array typecodes). */
enum { PT_I32 = 'i', PT_I64 = 'q', PT_F64 = 'd', PT_U8 = 'B' };

/* A column borrowed through the buffer protocol (release before resizing it). */
typedef struct {
    Py_buffer view;
    char *data;
    Py_ssize_t len; /* items */
    int held;
} pt_col;

/* Borrow `obj` as a C-contiguous column of `kind` (writable if asked); 0, or -1 with a
 * Python exception naming `what`.  Not async-signal-safe. */
int pt_col_get(pt_col *col, PyObject *obj, int kind, int writable, const char *what);
/* Give a borrowed column back (no-op when not held).  Not async-signal-safe. */
void pt_col_release(pt_col *col);
/* Borrow every column of a Python list (array('d'), `writable` if asked), at most
 * `most`: how many, or -1 with an exception naming `what`.  pt_cols_release gives them
 * back.  Not async-signal-safe. */
Py_ssize_t pt_cols_of(PyObject *list, pt_col *cols, Py_ssize_t most, int writable,
                      const char *what);
void pt_cols_release(pt_col *cols, Py_ssize_t n);
#define PT_I32P(c) ((int32_t *)(c)->data)
#define PT_I64P(c) ((int64_t *)(c)->data)
#define PT_F64P(c) ((double *)(c)->data)
#define PT_U8P(c) ((uint8_t *)(c)->data)

/* A vector of int64 read from a buffer ('i', 'q', 'B') or any sequence of ints. */
typedef struct {
    int64_t *items;
    Py_ssize_t len;
} pt_ints;
/* Read `obj` into `out` (malloc'd; pt_ints_free).  0, or -1 with an exception.
 * Not async-signal-safe. */
int pt_ints_get(pt_ints *out, PyObject *obj, const char *what);
void pt_ints_free(pt_ints *v);

/* A new array.array of `kind` holding `items` items copied from `data` (NULL: zeros).
 * Not async-signal-safe. */
PyObject *pt_array_new(int kind, const void *data, Py_ssize_t items);
/* Append `nbytes` of `data` to an array.array (frombytes) or bytearray (extend).
 * Not async-signal-safe. */
int pt_extend(PyObject *column, const void *data, Py_ssize_t nbytes);

/* Raise MemoryError, or `type` with `msg`, from code that may run with the GIL released
 * (the long loops of invert and callers let other threads run): the GIL is taken for
 * the call (PyGILState_Ensure is a no-op when it is held).  Not async-signal-safe. */
void pt_raise_nomem(void);
void pt_raise(PyObject *type, const char *msg);

/* Growable int32 vector (C memory); pt_vec_push may run without the GIL.
 * Not async-signal-safe. */
typedef struct {
    int32_t *items;
    Py_ssize_t len, cap;
} pt_vec;
int pt_vec_push(pt_vec *v, int32_t value);
void pt_vec_free(pt_vec *v);

/* The node after `node` in a pre-order walk over first-child/next-sibling links,
 * `ancestors` holding the open nodes: its first child (`node` pushed), else the next
 * sibling of it or of its nearest open ancestor; -1 at the end, -2 when `ancestors`
 * could not grow (the exception is set).  Not async-signal-safe. */
static inline int32_t pt_preorder_next(const int32_t *first, const int32_t *next,
                                       pt_vec *ancestors, int32_t node) {
    int32_t child = first[node];
    if (child >= 0)
        return pt_vec_push(ancestors, node) < 0 ? -2 : child;
    for (;;) {
        if (next[node] >= 0)
            return next[node];
        if (ancestors->len == 0)
            return -1;
        node = ancestors->items[--ancestors->len];
    }
}

/* ---- the (parent, frame) -> node index of a tree (pt_index.c) ---------------------- */

/* Nodes as an operation sees them: the tree's columns (nodes [0, n0)) plus the nodes
 * it made and has not yet appended to them (n0 + i). */
typedef struct {
    const int32_t *parents, *frames;
    Py_ssize_t n0;
    int32_t *new_parents, *new_frames;
    uint8_t *new_outer; /* per new node, when the operation keeps outermost flags */
    Py_ssize_t k, cap;
    int keep_outer;
} pt_nodes;

typedef struct pt_index pt_index;
extern PyType_Spec pt_index_spec;
/* The Index type, made at module init (one interpreter): pt_index_spec's type. */
extern PyObject *pt_index_type;

/* The node under `parent` for `frame`, or -1.  Not async-signal-safe (no locks, but
 * reads Python-owned buffers under the GIL). */
Py_ssize_t pt_index_find(pt_index *ix, const pt_nodes *t, int32_t parent, int32_t frame);
/* Forget every node (the columns were replaced, shrank or a commit failed). */
void pt_index_clear(pt_index *ix);
/* Nodes [1, count) are in the index (a commit appended the ones it made). */
void pt_index_indexed(pt_index *ix, Py_ssize_t count);
/* The node under `parent` for `frame`, made (as a new node of `t`) when absent; -1
 * with a Python exception on failure.  `*made` says whether it was made.  `fresh`: the
 * parent was made by the call just before, so it has no child yet (no key is compared:
 * no reads of other nodes' columns). */
Py_ssize_t pt_child_of(pt_index *ix, pt_nodes *t, int32_t parent, int32_t frame, int fresh,
                       int *made);
void pt_nodes_free(pt_nodes *t);

/* A CallTree's columns, opened for one operation.  The children links, calls and totals
 * are held only once something read them (CallTree._links, _calls, _totals): NULL (or
 * None for totals) while they are not. */
typedef struct {
    PyObject *obj;
    PyObject *parents, *frames, *selfs, *totals;
    PyObject *first, *last, *next; /* NULL: not held */
    PyObject *calls;               /* NULL: not held (every count unknown) */
    pt_index *index;               /* NULL unless asked for */
    Py_ssize_t n_metrics;
    pt_col cp, cf; /* parents and frames, read (pt_tree_read) */
} pt_tree;

/* Open `tree`'s columns (and its index, made and synced to the columns when
 * `with_index`).  0, or -1 with an exception.  Not async-signal-safe. */
int pt_tree_open(pt_tree *t, PyObject *tree, int with_index);
/* Make the children links held (CallTree._links_now) and open them.  0 or -1. */
int pt_tree_need_links(pt_tree *t);
/* Make the calls column held (CallTree.calls) and open it.  0 or -1. */
int pt_tree_need_calls(pt_tree *t);
/* Borrow parents and frames for reading and set up `nodes` over them. */
int pt_tree_read(pt_tree *t, pt_nodes *nodes);
/* Release what pt_tree_read borrowed. */
void pt_tree_unread(pt_tree *t);
void pt_tree_close(pt_tree *t);
/* ---- appending an operation's nodes; a tree's shape (pt_commit.c) ---------------------- */

/* Append the operation's new nodes to every column (zero costs, unknown calls), link
 * them to their parents in id order, extend `outer` (a bytearray) when the nodes keep
 * flags; the index already holds them.  Call after pt_tree_unread.  0 or -1. */
int pt_tree_commit(pt_tree *t, pt_nodes *nodes, PyObject *outer);

/* A tree's shape borrowed for a whole-tree pass: parents, frames and (when asked) the
 * children links (made if not held). */
typedef struct {
    pt_col parents, frames, first, next;
    Py_ssize_t n;
} pt_shape;
int pt_shape_get(pt_shape *s, pt_tree *t, int links);
void pt_shape_release(pt_shape *s);

/* Helpers of the tree builders (pt_build.c). */
int pt_check_node(long long node, Py_ssize_t n, const char *what);
int pt_push2(pt_vec *v, int32_t a, int32_t b);
int pt_list_col(pt_col *col, PyObject *list, Py_ssize_t m, int writable, const char *what);

/* ---- module functions, by file ---------------------------------------------------- */

/* pt_build.c */
PyObject *pt_py_child(PyObject *self, PyObject *args);
PyObject *pt_py_find(PyObject *self, PyObject *args);
PyObject *pt_py_walk(PyObject *self, PyObject *args);
PyObject *pt_py_insert_paths(PyObject *self, PyObject *args);
PyObject *pt_py_fold(PyObject *self, PyObject *args);
PyObject *pt_py_node_map(PyObject *self, PyObject *args);

/* pt_invert.c */
PyObject *pt_py_invert(PyObject *self, PyObject *args);
PyObject *pt_py_callers(PyObject *self, PyObject *args);
PyObject *pt_py_paths_of(PyObject *self, PyObject *args);

/* pt_sums.c */
PyObject *pt_py_totals(PyObject *self, PyObject *args);
PyObject *pt_py_link(PyObject *self, PyObject *args);
PyObject *pt_py_function_sums(PyObject *self, PyObject *args);
PyObject *pt_py_add_along(PyObject *self, PyObject *args);

/* pt_walks.c */
PyObject *pt_py_preorder(PyObject *self, PyObject *args);
PyObject *pt_py_max_depth(PyObject *self, PyObject *args);
PyObject *pt_py_outermost_of(PyObject *self, PyObject *args);
PyObject *pt_py_nodes_matching(PyObject *self, PyObject *args);
PyObject *pt_py_share_walk(PyObject *self, PyObject *args);
PyObject *pt_py_display_order(PyObject *self, PyObject *args);
PyObject *pt_py_neighbours(PyObject *self, PyObject *args);

/* pt_reshape.c */
PyObject *pt_py_pruned(PyObject *self, PyObject *args);
PyObject *pt_py_remap_frames(PyObject *self, PyObject *args);

/* pt_columns.c */
PyObject *pt_py_check(PyObject *self, PyObject *args);
PyObject *pt_py_scatter_add(PyObject *self, PyObject *args);
PyObject *pt_py_add_stacks(PyObject *self, PyObject *args);
PyObject *pt_py_slice_parts(PyObject *self, PyObject *args);
PyObject *pt_py_group_sums(PyObject *self, PyObject *args);
/* pt_rows.c */
PyObject *pt_py_add_rows(PyObject *self, PyObject *args);
PyObject *pt_py_take_changes(PyObject *self, PyObject *args);

/* pt_addr.c: the address -> frame ids cache of a stack table's address space */
extern PyType_Spec pt_addr_spec;

#endif
