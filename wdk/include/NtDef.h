/* NtDef.h: the spelling some sources use for <ntdef.h> (libndk WDK kit). */
#include <ntdef.h>
