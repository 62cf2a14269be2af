/*
 * mem_internal.h - what mem.c (the STag table), mr.c and mw.c (the MR and MW
 * objects) share beyond mem.h. Not for the data path: it uses mem.h only.
 */
#ifndef NDK_MEM_INTERNAL_H
#define NDK_MEM_INTERNAL_H

#include "mem.h"
#include "objects.h"

struct mem_entry;
enum mem_kind { MEM_KIND_MR = 1, MEM_KIND_FRMR = 2, MEM_KIND_MW = 3 };
/* A new entry (an STag index) for an MR or MW object of pd; owner is the
 * object (identity only). STATUS_INSUFFICIENT_RESOURCES when full. */
NTSTATUS mem_entry_new(struct mem_table *t, enum mem_kind kind, const struct ndk_pd_impl *pd,
                       struct ndk_obj *owner, struct mem_entry **out);
/* The object's close started (adapter lock held): no new window may depend
 * on it. Returns how many windows depend on it now: the successors the MR
 * object must add. */
unsigned mem_entry_close_start(struct mem_table *t, struct mem_entry *e);
/* The object is destroyed (adapter lock held): the index is freed and its
 * STag fails from now on. For a window whose MR counted it as a successor,
 * returns that MR object, to be released with ndk_obj_release_successor. */
struct ndk_obj *mem_entry_free(struct mem_table *t, struct mem_entry *e);
/* The virtually contiguous span of Length bytes an MDL chain starts
 * (5.3.7, 5.6.1): its first virtual address, or STATUS_INVALID_PARAMETER. */
NTSTATUS mem_mdl_span(const MDL *mdl, SIZE_T len, uint64_t *va);
NTSTATUS mem_mr_register(struct mem_table *t, struct mem_entry *e, uint64_t va, uint64_t len,
                         unsigned access);
NTSTATUS mem_mr_deregister(struct mem_table *t, struct mem_entry *e);
NTSTATUS mem_frmr_init(struct mem_table *t, struct mem_entry *e, ULONG npages, bool remote);
/* The token the getters return; 0 when none is valid yet. */
UINT32 mem_entry_token(struct mem_table *t, struct mem_entry *e);
/* The octets a valid MR or fast-registered MR covers; 0 otherwise (ndkstat). */
uint64_t mem_entry_registered_len(struct mem_table *t, struct mem_entry *e);
/* An MR or MW object (mr.c, mw.c): the object and its one entry of the
 * table. The table reaches the entry behind a consumer's pointer through
 * this shape, never by calling the object files (docs/architecture.md). */
struct mem_object {
    struct ndk_obj obj;
    struct ndk_pd_impl *pd;
    struct mem_entry *entry;
};
/* The entry behind a consumer's MR (type NdkObjectTypeMr) or MW
 * (NdkObjectTypeMw) pointer, and its object when obj is not NULL; NULL when
 * the pointer is not a live object of that type. */
struct mem_entry *mem_object_entry(const void *pub, NDK_OBJECT_TYPE type, struct ndk_obj **obj);
/* NdkCreateMr and NdkCreateMw once their arguments are checked: a new
 * object of type on the PD pdo, holding a new entry of kind, and counted as
 * a successor of the PD. STATUS_INSUFFICIENT_RESOURCES without memory or a
 * free index; STATUS_INVALID_PARAMETER once the PD's close started. */
NTSTATUS mem_object_create(struct ndk_obj *pdo, enum mem_kind kind, NDK_OBJECT_TYPE type,
                           const void *dispatch, const struct ndk_obj_ops *ops,
                           struct mem_object **out);
/* NdkGetRemoteTokenFromMr, NdkGetLocalTokenFromMr and
 * NdkGetRemoteTokenFromMw: the entry's token (mem_entry_token), 0 when pub
 * is no live object of that type. */
UINT32 mem_object_token(const void *pub, NDK_OBJECT_TYPE type);
/* The ndk_obj_ops free of both. */
void mem_object_free(struct ndk_obj *obj);
/* Test hook: where the next index search starts. */
void mem_test_set_cursor(struct mem_table *t, uint32_t idx);

#endif
