/*
 * ndksal.h - the SAL annotations that NDKPI's declarations use, as empty
 * macros: they say which parameters are inputs, outputs, optional, and how
 * large their buffers are; on Linux they document, they do not check. One
 * definition, shared by ndkinfo.h and the WDK kit's sal.h (which adds the
 * rest of SAL). Each is defined only if nothing defined it first; those with
 * arguments are variadic, as in the kit, so any spelling of them compiles.
 */
#ifndef NDK_NDKSAL_H
#define NDK_NDKSAL_H

#ifndef _In_
#define _In_
#endif
#ifndef _In_opt_
#define _In_opt_
#endif
#ifndef _Out_
#define _Out_
#endif
#ifndef _Out_opt_
#define _Out_opt_
#endif
#ifndef _Inout_
#define _Inout_
#endif
#ifndef _Outptr_
#define _Outptr_
#endif
#ifndef _In_reads_
#define _In_reads_(...)
#endif
#ifndef _In_reads_bytes_
#define _In_reads_bytes_(...)
#endif
#ifndef _In_reads_bytes_opt_
#define _In_reads_bytes_opt_(...)
#endif
#ifndef _Out_writes_to_
#define _Out_writes_to_(...)
#endif
#ifndef _Out_writes_bytes_to_opt_
#define _Out_writes_bytes_to_opt_(...)
#endif
/* Windows IRQL limits; in user space, DISPATCH_LEVEL means "must not block"
 * and PASSIVE_LEVEL "may block, never from a callback" (docs/rules.md T1,
 * T2). */
#ifndef _IRQL_requires_max_
#define _IRQL_requires_max_(...)
#endif

#endif /* NDK_NDKSAL_H */
