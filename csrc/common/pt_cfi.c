/* .eh_frame -> compact unwind rows, built outside signal handlers (sampler:
 * at start and after dlopen, from the loaded object's own memory; attach:
 * from a read-only mapping of the object's file) so a walk only
 * binary-searches (as async-profiler does).  For each FDE listed in
 * .eh_frame_hdr's search table (or, for an object without one, such as a
 * `gcc -static` link, found by walking .eh_frame and sorted) we run the CFA
 * program and emit one row per address range:
 *     { pc, CFA = sp|fp + off, caller's fp at CFA + off (or unchanged) }
 * which covers what gcc and clang emit for x86-64 code: push/pop prologues,
 * rbp frames, stack adjustments, remember/restore_state around early returns.
 * PLT stubs' CFA expression is read as rsp+8.  Anything else (other CFA
 * expressions, return address not at CFA-8, 64-bit DWARF) becomes a "no
 * rule" row: the walk follows the frame-pointer chain there.  Every read is
 * checked against the source's bounds (a corrupt file cannot make us fault).
 * Nothing in this file is async-signal-safe.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "pt_unwind.h"

/* Bytes of the last table memory pt_cfi_build could not get (0: none since
 * the caller reset it), so a runtime can say why an object has no rows.
 * Written outside handlers only, like every table. */
PT_HIDDEN uint64_t pt_cfi_failed_bytes;

/* Give a table back.  Not async-signal-safe. */
void pt_cfi_free(struct pt_cfi_table *table) {
    if (table == NULL) return;
    size_t page = 4096;
    pt_free((void *)table->rows, (table->nrows * sizeof *table->rows + page - 1) / page * page);
    if (table->bucket_start != NULL)
        pt_free((void *)table->bucket_start, pt_cfi_bucket_bytes(table->hi - table->lo));
    pt_free(table, sizeof *table);
}

#if PT_ARCH_CFI

enum { PT_RULE_SAME = 0, PT_RULE_OFFSET = 1, PT_RULE_OTHER = 2 };
#define PT_STATE_STACK 16

/* The unwind state for the registers we track. */
struct pt_cfa_state {
    int cfa_reg; /* DWARF register, -1 when the CFA is an expression */
    int64_t cfa_off;
    int fp_rule; /* PT_RULE_* */
    int64_t fp_off;
    int ra_rule; /* PT_RULE_OFFSET expected (at CFA-8); PT_RULE_OTHER: give up */
    int64_t ra_off;
    int ra_undefined; /* the outermost frame (_start, clone) */
};

struct pt_cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int has_z;
    const uint8_t *insns, *end;
    int64_t delta; /* runtime - local address (pc-relative DW_CFA_set_loc) */
};

/* Cursor over mapped bytes. */
struct pt_rd {
    const uint8_t *p, *end;
    int bad;
    int64_t delta; /* runtime address - local address, for pc-relative pointers */
};

static uint64_t pt_uleb(struct pt_rd *r) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (r->p < r->end) {
        uint8_t b = *r->p++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t pt_sleb(struct pt_rd *r) {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (r->p < r->end) {
        b = *r->p++;
        if (shift < 64) v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
            return v;
        }
    }
    r->bad = 1;
    return 0;
}

static uint64_t pt_fixed(struct pt_rd *r, unsigned size) {
    if (r->p + size > r->end) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, r->p, size); /* little-endian */
    r->p += size;
    return v;
}

/* A DW_EH_PE_* encoded pointer (pcrel and absolute applications only). */
static uint64_t pt_encoded(struct pt_rd *r, uint8_t enc) {
    if (enc == 0xff) return 0; /* DW_EH_PE_omit */
    uint64_t here = (uint64_t)(uintptr_t)r->p + (uint64_t)r->delta, v;
    switch (enc & 0x0f) {
    case 0x00: v = pt_fixed(r, 8); break;
    case 0x01: v = pt_uleb(r); break;
    case 0x02: v = pt_fixed(r, 2); break;
    case 0x03: v = pt_fixed(r, 4); break;
    case 0x04: v = pt_fixed(r, 8); break;
    case 0x09: v = (uint64_t)pt_sleb(r); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)pt_fixed(r, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)pt_fixed(r, 4); break;
    case 0x0c: v = pt_fixed(r, 8); break;
    default: r->bad = 1; return 0;
    }
    if ((enc & 0x70) == 0x10) v += here; /* DW_EH_PE_pcrel */
    return v;
}

/* 1 if [p, p + n) lies inside the source's readable bounds. */
static int pt_inside(const struct pt_cfi_source *src, const uint8_t *p, uint64_t n) {
    /* As integers: the bounds may be "all memory", not one C object. */
    uintptr_t at = (uintptr_t)p, lo = (uintptr_t)src->bound_lo, hi = (uintptr_t)src->bound_hi;
    return at >= lo && at <= hi && n <= hi - at;
}

/* Parse the CIE at `p`; 0 on success. */
static int pt_parse_cie(const struct pt_cfi_source *src, const uint8_t *p, struct pt_cie *cie) {
    uint32_t len;
    if (!pt_inside(src, p, 4)) return -1;
    memcpy(&len, p, 4);
    if (len == 0 || len == 0xffffffffu || !pt_inside(src, p, 4 + (uint64_t)len)) return -1;
    int64_t delta = (int64_t)(src->hdr_addr - (uint64_t)(uintptr_t)src->hdr);
    struct pt_rd r = {p + 4, p + 4 + len, 0, delta};
    if (pt_fixed(&r, 4) != 0) return -1; /* CIE id */
    uint8_t version = (uint8_t)pt_fixed(&r, 1);
    const char *aug = (const char *)r.p;
    size_t auglen = strnlen(aug, (size_t)(r.end - r.p));
    r.p += auglen + 1;
    memset(cie, 0, sizeof *cie);
    cie->delta = delta;
    if (strstr(aug, "eh") != NULL) pt_fixed(&r, 8);
    cie->code_align = pt_uleb(&r);
    cie->data_align = pt_sleb(&r);
    cie->ra_reg = version == 1 ? pt_fixed(&r, 1) : pt_uleb(&r);
    cie->fde_enc = 0; /* absptr unless 'R' says otherwise */
    if (aug[0] == 'z') {
        cie->has_z = 1;
        uint64_t n = pt_uleb(&r);
        const uint8_t *after = r.p + n;
        for (const char *a = aug + 1; *a && !r.bad; a++) {
            if (*a == 'R') cie->fde_enc = (uint8_t)pt_fixed(&r, 1);
            else if (*a == 'P') pt_encoded(&r, (uint8_t)pt_fixed(&r, 1) & 0x7f);
            else if (*a == 'L') pt_fixed(&r, 1);
            else if (*a != 'S' && *a != 'B') break; /* unknown: skip via length */
        }
        r.p = after;
    } else if (aug[0] != '\0') {
        return -1; /* augmentation we cannot skip */
    }
    if (r.bad || r.p > r.end || cie->ra_reg != PT_DW_RA) return -1;
    cie->insns = r.p;
    cie->end = r.end;
    return 0;
}

/* Output rows: an array reserved at its upper bound (untouched pages cost
 * nothing; the unused tail is returned afterwards). */
struct pt_rows {
    struct pt_cfi_row *rows;
    size_t n, cap;
    uint64_t lo; /* row pcs are offsets from here */
};

static int pt_same_rule(const struct pt_cfi_row *a, const struct pt_cfi_row *b) {
    return a->cfa_reg == b->cfa_reg && a->cfa_off8 == b->cfa_off8 && a->fp_off8 == b->fp_off8;
}

static void pt_emit(struct pt_rows *out, uint64_t pc, const struct pt_cfa_state *s) {
    if (pc < out->lo || pc - out->lo > UINT32_MAX) return;
    struct pt_cfi_row row = {(uint32_t)(pc - out->lo), 0, 0, PT_CFA_NONE};
    if (s->ra_undefined) {
        row.cfa_reg = PT_ROW_OUTERMOST;
    } else if ((s->cfa_reg == PT_DW_SP || s->cfa_reg == PT_DW_FP) && s->ra_rule == PT_RULE_OFFSET &&
               s->ra_off == -8 && s->cfa_off >= 8 && s->cfa_off % 8 == 0 &&
               s->cfa_off / 8 <= INT16_MAX && s->fp_rule != PT_RULE_OTHER &&
               (s->fp_rule == PT_RULE_SAME ||
                (s->fp_off < 0 && s->fp_off % 8 == 0 && s->fp_off / 8 >= INT8_MIN))) {
        row.cfa_reg = s->cfa_reg == PT_DW_SP ? PT_CFA_SP : PT_CFA_FP;
        row.cfa_off8 = (int16_t)(s->cfa_off / 8);
        row.fp_off8 = s->fp_rule == PT_RULE_OFFSET ? (int8_t)(s->fp_off / 8) : 0;
    }
    if (out->n > 0) {
        struct pt_cfi_row *last = &out->rows[out->n - 1];
        if (row.pc < last->pc) return; /* overlapping FDEs: keep the first */
        if (row.pc == last->pc) {      /* the later rule for the same address wins */
            *last = row;
            if (out->n > 1 && pt_same_rule(last - 1, &row)) out->n--;
            return;
        }
        if (pt_same_rule(last, &row)) return; /* same rule continues */
    }
    if (out->n < out->cap) out->rows[out->n++] = row;
}

/* Run CFA instructions [p, end); with `out`, emit a row at each advance.
 * Returns 0, or -1 on an instruction we do not model (the rest gets no rule). */
static int pt_run(const uint8_t *p, const uint8_t *end, const struct pt_cie *cie,
                  struct pt_cfa_state *s, const struct pt_cfa_state *initial, uint64_t *loc,
                  struct pt_rows *out) {
    struct pt_cfa_state stack[PT_STATE_STACK];
    int depth = 0;
    struct pt_rd r = {p, end, 0, cie->delta};
    while (r.p < r.end && !r.bad) {
        uint8_t op = *r.p++;
        uint8_t hi = op & 0xc0, low = op & 0x3f;
        uint64_t reg, delta = 0;
        int64_t off;
        if (hi == 0x40) {
            delta = low * cie->code_align;
        } else if (hi == 0x80) {
            off = (int64_t)pt_uleb(&r) * cie->data_align;
            if (low == PT_DW_FP) s->fp_rule = PT_RULE_OFFSET, s->fp_off = off;
            if (low == PT_DW_RA) s->ra_rule = PT_RULE_OFFSET, s->ra_off = off;
            continue;
        } else if (hi == 0xc0) {
            if (low == PT_DW_FP) s->fp_rule = initial->fp_rule, s->fp_off = initial->fp_off;
            if (low == PT_DW_RA) s->ra_rule = initial->ra_rule, s->ra_off = initial->ra_off;
            continue;
        } else {
            switch (op) {
            case 0x00: continue;                                      /* nop */
            case 0x01: *loc = pt_encoded(&r, cie->fde_enc); continue; /* set_loc */
            case 0x02: delta = pt_fixed(&r, 1) * cie->code_align; break;
            case 0x03: delta = pt_fixed(&r, 2) * cie->code_align; break;
            case 0x04: delta = pt_fixed(&r, 4) * cie->code_align; break;
            case 0x05: /* offset_extended */
            case 0x11: /* offset_extended_sf */
            case 0x2f: /* GNU_negative_offset_extended */
                reg = pt_uleb(&r);
                off = op == 0x11 ? pt_sleb(&r) * cie->data_align
                                 : (int64_t)pt_uleb(&r) *
                                       (op == 0x2f ? -cie->data_align : cie->data_align);
                if (reg == PT_DW_FP) s->fp_rule = PT_RULE_OFFSET, s->fp_off = off;
                if (reg == PT_DW_RA) s->ra_rule = PT_RULE_OFFSET, s->ra_off = off;
                continue;
            case 0x06: /* restore_extended */
                reg = pt_uleb(&r);
                if (reg == PT_DW_FP) s->fp_rule = initial->fp_rule, s->fp_off = initial->fp_off;
                if (reg == PT_DW_RA) s->ra_rule = initial->ra_rule, s->ra_off = initial->ra_off;
                continue;
            case 0x07: /* undefined */
                reg = pt_uleb(&r);
                if (reg == PT_DW_RA) s->ra_undefined = 1;
                if (reg == PT_DW_FP) s->fp_rule = PT_RULE_SAME; /* nothing to restore */
                continue;
            case 0x08: /* same_value */
                reg = pt_uleb(&r);
                if (reg == PT_DW_FP) s->fp_rule = PT_RULE_SAME;
                continue;
            case 0x09: /* register */
                reg = pt_uleb(&r);
                pt_uleb(&r);
                if (reg == PT_DW_FP) s->fp_rule = PT_RULE_OTHER;
                if (reg == PT_DW_RA) s->ra_rule = PT_RULE_OTHER;
                continue;
            case 0x0a: /* remember_state */
                if (depth == PT_STATE_STACK) return -1;
                stack[depth++] = *s;
                continue;
            case 0x0b: /* restore_state: the CFA rule is not part of it? it is, in GCC's
                        * reading of the spec as in every unwinder: restore everything */
                if (depth == 0) return -1;
                *s = stack[--depth];
                continue;
            case 0x0c: /* def_cfa */
                s->cfa_reg = (int)pt_uleb(&r);
                s->cfa_off = (int64_t)pt_uleb(&r);
                continue;
            case 0x12: /* def_cfa_sf */
                s->cfa_reg = (int)pt_uleb(&r);
                s->cfa_off = pt_sleb(&r) * cie->data_align;
                continue;
            case 0x0d: s->cfa_reg = (int)pt_uleb(&r); continue;     /* def_cfa_register */
            case 0x0e: s->cfa_off = (int64_t)pt_uleb(&r); continue; /* def_cfa_offset */
            case 0x13: s->cfa_off = pt_sleb(&r) * cie->data_align; continue;
            case 0x0f: { /* def_cfa_expression */
                uint64_t len = pt_uleb(&r);
                /* The PLT's "rsp + 8 (+ 8 after the push)" starts DW_OP_breg7 8:
                 * rsp + 8 is right at the jmp where nearly all PLT samples land. */
                int plt = len >= 2 && r.p + 2 <= r.end && r.p[0] == 0x77 && r.p[1] == 0x08;
                r.p += len;
                s->cfa_reg = plt ? PT_DW_SP : -1;
                s->cfa_off = 8;
                continue;
            }
            case 0x10: /* expression */
            case 0x16: /* val_expression */
                reg = pt_uleb(&r);
                r.p += pt_uleb(&r);
                if (reg == PT_DW_FP) s->fp_rule = PT_RULE_OTHER;
                if (reg == PT_DW_RA) s->ra_rule = PT_RULE_OTHER;
                continue;
            case 0x14: /* val_offset */
            case 0x15: /* val_offset_sf */
                reg = pt_uleb(&r);
                if (op == 0x14) pt_uleb(&r);
                else pt_sleb(&r);
                if (reg == PT_DW_FP) s->fp_rule = PT_RULE_OTHER;
                if (reg == PT_DW_RA) s->ra_rule = PT_RULE_OTHER;
                continue;
            case 0x2e: pt_uleb(&r); continue; /* GNU_args_size */
            default: return -1;
            }
        }
        /* An advance: the state so far holds from *loc up to the new location. */
        if (out != NULL) pt_emit(out, *loc, s);
        *loc += delta;
    }
    return r.bad ? -1 : 0;
}

/* Append the rows of the FDE at `fde`, which starts at runtime pc_begin. */
static void pt_fde_rows(const struct pt_cfi_source *src, const uint8_t *fde, uint64_t pc_begin,
                        struct pt_rows *out) {
    uint32_t len, cie_off;
    if (!pt_inside(src, fde, 8)) return;
    memcpy(&len, fde, 4);
    if (len < 4 || len == 0xffffffffu || !pt_inside(src, fde, 4 + (uint64_t)len)) return;
    memcpy(&cie_off, fde + 4, 4);
    if (cie_off == 0 || (uintptr_t)fde + 4 - (uintptr_t)src->bound_lo < cie_off) return; /* CIE */
    struct pt_cie cie;
    if (pt_parse_cie(src, fde + 4 - cie_off, &cie) != 0) return;
    struct pt_rd r = {fde + 8, fde + 4 + len, 0, cie.delta};
    pt_encoded(&r, cie.fde_enc); /* pc_begin: the table's value is used */
    uint64_t range = pt_encoded(&r, cie.fde_enc & 0x0f);
    if (cie.has_z) r.p += pt_uleb(&r);
    if (r.bad || r.p > r.end || range == 0) return;
    struct pt_cfa_state initial = {PT_DW_SP, 8, PT_RULE_SAME, 0, PT_RULE_OFFSET, -8, 0};
    uint64_t loc = pc_begin;
    /* The CIE's initial instructions define the state at pc_begin. */
    if (pt_run(cie.insns, cie.end, &cie, &initial, &initial, &loc, NULL) != 0) return;
    loc = pc_begin;
    struct pt_cfa_state s = initial;
    int ok = pt_run(r.p, r.end, &cie, &s, &initial, &loc, out) == 0;
    if (loc < pc_begin + range) {
        if (!ok) s.cfa_reg = -1; /* unmodelled instruction: no rule from here */
        pt_emit(out, loc, &s);
    }
    struct pt_cfa_state none = {-1, 0, PT_RULE_SAME, 0, PT_RULE_OFFSET, -8, 0};
    pt_emit(out, pc_begin + range, &none); /* past the function: no rule */
}

/* One FDE of an object: the runtime address of its function's start and
 * where its bytes are here. */
struct pt_fde_ent {
    uint64_t pc;
    const uint8_t *fde;
};

/* An object's FDEs in pc order: .eh_frame_hdr's search table read in place
 * (`table`), or the entries a walk of .eh_frame collected (`ents`). */
struct pt_fde_index {
    const uint8_t *table; /* count (pc, fde) pairs, datarel sdata4 from src->hdr */
    struct pt_fde_ent *ents;
    size_t ents_bytes; /* pt_alloc'd for ents */
    uint64_t count;
};

/* The i-th FDE of `ix`.  Not async-signal-safe (never called from a handler). */
static void pt_fde_at(const struct pt_cfi_source *src, const struct pt_fde_index *ix, uint64_t i,
                      uint64_t *pc, const uint8_t **fde) {
    if (ix->ents != NULL) {
        *pc = ix->ents[i].pc;
        *fde = ix->ents[i].fde;
        return;
    }
    int32_t pc_off, fde_off;
    memcpy(&pc_off, ix->table + 8 * i, 4);
    memcpy(&fde_off, ix->table + 8 * i + 4, 4);
    *pc = src->hdr_addr + (uint64_t)(int64_t)pc_off;
    *fde = src->hdr + fde_off;
}

/* Sift ents[at] down the max-heap ents[0, n) (by pc).  Not async-signal-safe. */
static void pt_fde_sift(struct pt_fde_ent *ents, size_t at, size_t n) {
    for (;;) {
        size_t big = at, l = 2 * at + 1, r = l + 1;
        if (l < n && ents[l].pc > ents[big].pc) big = l;
        if (r < n && ents[r].pc > ents[big].pc) big = r;
        if (big == at) return;
        struct pt_fde_ent t = ents[at];
        ents[at] = ents[big];
        ents[big] = t;
        at = big;
    }
}

/* Sort by pc in place: heapsort, since qsort may malloc and the heap
 * runtime builds tables inside its own malloc's callers.  Not async-signal-safe. */
static void pt_fde_sort(struct pt_fde_ent *ents, size_t n) {
    for (size_t i = n / 2; i-- > 0;) pt_fde_sift(ents, i, n);
    for (size_t end = n; end-- > 1;) {
        struct pt_fde_ent t = ents[0];
        ents[0] = ents[end];
        ents[end] = t;
        pt_fde_sift(ents, 0, end);
    }
}

/* Walk .eh_frame (src->hdr, src->eh_frame_len bytes): count its FDEs, and
 * with `out` (room for that count) store each one's start and place.  A
 * 64-bit or malformed entry ends the walk; CIEs are skipped.  Returns the
 * number of FDEs.  Not async-signal-safe. */
static uint64_t pt_fde_walk(const struct pt_cfi_source *src, struct pt_fde_ent *out) {
    const uint8_t *p = src->hdr, *end = src->hdr + src->eh_frame_len;
    int64_t delta = (int64_t)(src->hdr_addr - (uint64_t)(uintptr_t)src->hdr);
    const uint8_t *cie_at = NULL; /* the CIE `cie` holds (FDEs share a few) */
    struct pt_cie cie;
    uint64_t n = 0;
    while (end - p >= 4) {
        uint32_t len, id;
        memcpy(&len, p, 4);
        if (len == 0) { /* a terminator (a static link may hold several) */
            p += 4;
            continue;
        }
        if (len < 4 || len == 0xffffffffu || len > (uint64_t)(end - p) - 4) break;
        memcpy(&id, p + 4, 4);
        if (id != 0 && id <= (uint64_t)(p + 4 - src->hdr)) { /* an FDE whose CIE is in the section */
            if (out == NULL) {
                n++;
            } else if (p + 4 - id == cie_at || pt_parse_cie(src, p + 4 - id, &cie) == 0) {
                cie_at = p + 4 - id;
                struct pt_rd r = {p + 8, p + 4 + len, 0, delta};
                uint64_t pc = pt_encoded(&r, cie.fde_enc);
                if (!r.bad) out[n++] = (struct pt_fde_ent){pc, p};
            } else {
                cie_at = NULL;
            }
        }
        p += 4 + (uint64_t)len;
    }
    return n;
}

/* The FDE index of `src`: .eh_frame_hdr's table, or (eh_frame_len) entries
 * collected from .eh_frame and sorted, in pt_alloc'd memory the caller frees
 * with pt_fde_index_free.  0, or -1 when there is none (or no memory).  Not
 * async-signal-safe. */
static int pt_fde_index(const struct pt_cfi_source *src, struct pt_fde_index *ix) {
    memset(ix, 0, sizeof *ix);
    const uint8_t *hdr = src->hdr;
    if (src->eh_frame_len != 0) {
        if (!pt_inside(src, hdr, src->eh_frame_len)) return -1;
        uint64_t count = pt_fde_walk(src, NULL);
        if (count == 0 || count > (1u << 24)) return -1;
        ix->ents_bytes = count * sizeof *ix->ents;
        ix->ents = pt_alloc(ix->ents_bytes);
        if (ix->ents == NULL) {
            pt_cfi_failed_bytes = ix->ents_bytes;
            return -1;
        }
        ix->count = pt_fde_walk(src, ix->ents);
        pt_fde_sort(ix->ents, ix->count);
        return 0;
    }
    if (!pt_inside(src, hdr, 4 + 16) || hdr[0] != 1) return -1;
    uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    int64_t delta = (int64_t)(src->hdr_addr - (uint64_t)(uintptr_t)hdr);
    struct pt_rd r = {hdr + 4, hdr + 4 + 16, 0, delta};
    pt_encoded(&r, ptr_enc);
    uint64_t count = pt_encoded(&r, count_enc);
    /* DW_EH_PE_datarel|sdata4, what every linker writes; anything else: no table. */
    if (r.bad || table_enc != 0x3b || count == 0 || count > (1u << 24) ||
        !pt_inside(src, r.p, count * 8))
        return -1;
    ix->table = r.p;
    ix->count = count;
    return 0;
}

/* Give back what pt_fde_index allocated.  Not async-signal-safe. */
static void pt_fde_index_free(struct pt_fde_index *ix) {
    pt_free(ix->ents, ix->ents_bytes);
    ix->ents = NULL;
}

/* Build the rows of one object from its FDE index (.eh_frame_hdr's search
 * table, or a walk of .eh_frame).  NULL when the object has none we can
 * read.  Not async-signal-safe. */
/* Upper bound of the rows of an index: a row per advance instruction (>= 1
 * byte) plus two per FDE.  Not async-signal-safe. */
static size_t pt_fde_bound(const struct pt_cfi_source *src, const struct pt_fde_index *ix) {
    size_t bound = 0;
    for (uint64_t i = 0; i < ix->count; i++) {
        uint64_t pc;
        const uint8_t *fde;
        uint32_t len = 0;
        pt_fde_at(src, ix, i, &pc, &fde);
        if (pt_inside(src, fde, 4)) memcpy(&len, fde, 4);
        if (!pt_inside(src, fde, 4 + (uint64_t)len)) len = 0; /* skipped later */
        bound += len + 2;
    }
    return bound;
}

/* The rows of every FDE of the index whose pc lies in [lo, hi), into `out`.
 * Not async-signal-safe. */
static void pt_fde_all_rows(const struct pt_cfi_source *src, const struct pt_fde_index *ix,
                            uint64_t lo, uint64_t hi, struct pt_rows *out) {
    for (uint64_t i = 0; i < ix->count; i++) {
        uint64_t pc;
        const uint8_t *fde;
        pt_fde_at(src, ix, i, &pc, &fde);
        if (pc < lo || pc >= hi) continue;
        pt_fde_rows(src, fde, pc, out);
    }
}

/* See pt_unwind.h.  Not async-signal-safe by contract (mmap only, and none
 * for a source with .eh_frame_hdr). */
long pt_cfi_build_rows(const struct pt_cfi_source *src, uint64_t lo, uint64_t hi,
                       struct pt_cfi_row *rows, size_t cap) {
    struct pt_fde_index ix;
    if (hi <= lo || hi - lo > UINT32_MAX || pt_fde_index(src, &ix) != 0) return -1;
    size_t bound = pt_fde_bound(src, &ix);
    if (bound > cap) {
        pt_fde_index_free(&ix);
        return -1;
    }
    struct pt_rows out = {rows, 0, bound, lo};
    pt_fde_all_rows(src, &ix, lo, hi, &out);
    pt_fde_index_free(&ix);
    return (long)out.n;
}

/* The bucket index of `n` sorted rows covering `span` bytes (see struct
 * pt_cfi_table), or NULL when it cannot be had or would outweigh the rows (a
 * sparse range).  Not async-signal-safe. */
static const uint32_t *pt_cfi_buckets(const struct pt_cfi_row *rows, size_t n, uint64_t span) {
    uint64_t buckets = (span >> PT_CFI_BUCKET_SHIFT) + 1;
    if (n == 0 || buckets > 2 * (uint64_t)n) return NULL;
    uint32_t *start = pt_alloc(pt_cfi_bucket_bytes(span)); /* buckets + 1 entries */
    if (start == NULL) return NULL; /* lookups search the whole table: slower, same rows */
    size_t r = 0;
    for (uint64_t b = 0; b <= buckets; b++) {
        while (r < n && (uint64_t)rows[r].pc < (b << PT_CFI_BUCKET_SHIFT)) r++;
        start[b] = (uint32_t)r;
    }
    return start;
}

struct pt_cfi_table *pt_cfi_build(const struct pt_cfi_source *src, uint64_t lo, uint64_t hi) {
    struct pt_fde_index ix;
    if (hi <= lo || hi - lo > UINT32_MAX || pt_fde_index(src, &ix) != 0) return NULL;
    size_t bound = pt_fde_bound(src, &ix);
    struct pt_rows out = {pt_alloc(bound * sizeof(struct pt_cfi_row)), 0, bound, lo};
    if (out.rows == NULL) {
        pt_cfi_failed_bytes = bound * sizeof(struct pt_cfi_row);
        pt_fde_index_free(&ix);
        return NULL;
    }
    pt_fde_all_rows(src, &ix, lo, hi, &out);
    pt_fde_index_free(&ix);
    /* Give back the pages the rows did not reach (they were never touched). */
    size_t page = 4096, used = (out.n * sizeof *out.rows + page - 1) / page * page;
    size_t reserved = (bound * sizeof *out.rows + page - 1) / page * page;
    if (reserved > used) pt_free((char *)out.rows + used, reserved - used);
    struct pt_cfi_table *t = out.n > 0 ? pt_alloc(sizeof *t) : NULL;
    if (t == NULL && out.n > 0) pt_cfi_failed_bytes = sizeof *t;
    if (t == NULL) {
        if (used > 0) pt_free(out.rows, used);
        return NULL;
    }
    t->lo = lo;
    t->hi = hi;
    t->nrows = out.n;
    t->flags = 0;
    t->rows = out.rows;
    t->bucket_start = pt_cfi_buckets(out.rows, out.n, hi - lo);
    return t;
}

#else /* no CFI support on this architecture (arch/pt_arch.h): frame pointers only */

struct pt_cfi_table *pt_cfi_build(const struct pt_cfi_source *src, uint64_t lo, uint64_t hi) {
    (void)src;
    (void)lo;
    (void)hi;
    return NULL;
}

long pt_cfi_build_rows(const struct pt_cfi_source *src, uint64_t lo, uint64_t hi,
                       struct pt_cfi_row *rows, size_t cap) {
    (void)src;
    (void)lo;
    (void)hi;
    (void)rows;
    (void)cap;
    return -1;
}

#endif
