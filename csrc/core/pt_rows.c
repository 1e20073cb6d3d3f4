/* pt_rows.c: a stack table's cost changes as columns (stacktable/builder.py): costs a
 * batch adds to some of its stacks, and what moved since the last interval.  A sampled
 * program's stacks are mostly distinct (every instruction of a hot loop is a leaf of
 * its own), so these run once per sample: per entry in C, not per entry in Python.
 * Sums run in entry order, as the Python loops they replace did. */
#include "pt_core.h"

#define PT_ROWS_MOST 64 /* metrics a table may have (collectors/model/profile.py has 12) */

/* Whether entry `e` of `values` has a non-zero cost (a NaN counts).  Pure. */
static int pt_rows_any(const pt_col *values, Py_ssize_t n, Py_ssize_t e) {
    for (Py_ssize_t m = 0; m < n; m++)
        if (PT_F64P(&values[m])[e] != 0.0)
            return 1;
    return 0;
}

/* add_rows(selfs, leaves, index, values, parts, part): for each entry e with a non-zero
 * value (whose stack is of `part`, when `parts` is not None),
 * selfs[m][leaves[index[e]]] += values[m][e].  Not async-signal-safe. */
PyObject *pt_py_add_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *selfs_obj, *leaves_obj, *index_obj, *values_obj, *parts_obj;
    long long part;
    if (!PyArg_ParseTuple(args, "OOOOOL:add_rows", &selfs_obj, &leaves_obj, &index_obj,
                          &values_obj, &parts_obj, &part))
        return NULL;
    pt_col selfs[PT_ROWS_MOST], values[PT_ROWS_MOST], leaves, index, parts = {0};
    Py_ssize_t ns = pt_cols_of(selfs_obj, selfs, PT_ROWS_MOST, 1, "selfs");
    if (ns < 0)
        return NULL;
    Py_ssize_t nv = pt_cols_of(values_obj, values, PT_ROWS_MOST, 0, "values");
    if (nv < 0) {
        pt_cols_release(selfs, ns);
        return NULL;
    }
    int ok = 0, held = 0;
    if (pt_col_get(&leaves, leaves_obj, PT_I64, 0, "leaves") < 0)
        goto done;
    if (pt_col_get(&index, index_obj, PT_I64, 0, "index") < 0)
        goto leaves_done;
    if (parts_obj != Py_None && pt_col_get(&parts, parts_obj, PT_I64, 0, "parts") < 0)
        goto index_done;
    held = 1;
    ok = ns == nv;
    for (Py_ssize_t m = 0; ok && m < nv; m++)
        ok = values[m].len >= index.len;
    for (Py_ssize_t e = 0; ok && e < index.len; e++) {
        int64_t s = PT_I64P(&index)[e];
        if (s < 0 || s >= leaves.len || (parts_obj != Py_None && s >= parts.len)) {
            ok = 0;
            break;
        }
        if ((parts_obj != Py_None && PT_I64P(&parts)[s] != part) || !pt_rows_any(values, nv, e))
            continue;
        int64_t leaf = PT_I64P(&leaves)[s];
        for (Py_ssize_t m = 0; ok && m < nv; m++) {
            if (leaf < 0 || leaf >= selfs[m].len)
                ok = 0;
            else
                PT_F64P(&selfs[m])[leaf] += PT_F64P(&values[m])[e];
        }
    }
    pt_col_release(&parts);
index_done:
    pt_col_release(&index);
leaves_done:
    pt_col_release(&leaves);
    if (held && !ok)
        PyErr_SetString(PyExc_IndexError, "add_rows: a stack or node out of range, or a "
                                          "column too short");
done:
    pt_cols_release(selfs, ns);
    pt_cols_release(values, nv);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* take_changes(costs, handed, index) -> (moved, deltas): for each stack index[e] whose
 * costs differ from what was handed out, its index (in `moved`, array('q')) and
 * costs[m] - handed[m] (deltas[m], array('d')); handed then equals costs there.
 * Not async-signal-safe. */
PyObject *pt_py_take_changes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *costs_obj, *handed_obj, *index_obj;
    if (!PyArg_ParseTuple(args, "OOO:take_changes", &costs_obj, &handed_obj, &index_obj))
        return NULL;
    pt_col costs[PT_ROWS_MOST], handed[PT_ROWS_MOST], index;
    Py_ssize_t nc = pt_cols_of(costs_obj, costs, PT_ROWS_MOST, 0, "costs");
    if (nc < 0)
        return NULL;
    Py_ssize_t nh = pt_cols_of(handed_obj, handed, PT_ROWS_MOST, 1, "handed");
    if (nh < 0) {
        pt_cols_release(costs, nc);
        return NULL;
    }
    PyObject *result = NULL;
    int64_t *moved = NULL;
    double *deltas = NULL;
    if (pt_col_get(&index, index_obj, PT_I64, 0, "index") < 0)
        goto done;
    Py_ssize_t n = index.len, kept = 0;
    int ok = nc == nh;
    for (Py_ssize_t m = 0; ok && m < nc; m++)
        ok = handed[m].len >= costs[m].len;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "take_changes: handed columns shorter than costs");
        goto index_done;
    }
    moved = PyMem_Malloc(sizeof *moved * (size_t)(n + 1));
    deltas = PyMem_Malloc(sizeof *deltas * (size_t)(n * nc + 1));
    if (moved == NULL || deltas == NULL) {
        PyErr_NoMemory();
        goto index_done;
    }
    for (Py_ssize_t e = 0; e < n; e++) {
        int64_t s = PT_I64P(&index)[e];
        int any = 0;
        for (Py_ssize_t m = 0; m < nc; m++) {
            if (s < 0 || s >= costs[m].len) {
                PyErr_SetString(PyExc_IndexError, "take_changes: stack out of range");
                goto index_done;
            }
            double d = PT_F64P(&costs[m])[s] - PT_F64P(&handed[m])[s];
            deltas[m * n + kept] = d;
            any |= d != 0.0;
        }
        if (!any)
            continue;
        for (Py_ssize_t m = 0; m < nc; m++)
            PT_F64P(&handed[m])[s] = PT_F64P(&costs[m])[s];
        moved[kept++] = s;
    }
    PyObject *columns = PyList_New(nc);
    PyObject *moved_obj = pt_array_new(PT_I64, moved, kept);
    for (Py_ssize_t m = 0; columns != NULL && m < nc; m++) {
        PyObject *column = pt_array_new(PT_F64, deltas + m * n, kept);
        if (column == NULL) {
            Py_CLEAR(columns);
            break;
        }
        PyList_SetItem(columns, m, column);
    }
    if (columns != NULL && moved_obj != NULL)
        result = PyTuple_Pack(2, moved_obj, columns);
    Py_XDECREF(columns);
    Py_XDECREF(moved_obj);
index_done:
    pt_col_release(&index);
done:
    PyMem_Free(moved);
    PyMem_Free(deltas);
    pt_cols_release(costs, nc);
    pt_cols_release(handed, nh);
    return result;
}
