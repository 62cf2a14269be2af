/* NtStrSafe.h: the spelling some sources use for <ntstrsafe.h> (libndk WDK kit). */
#include <ntstrsafe.h>
