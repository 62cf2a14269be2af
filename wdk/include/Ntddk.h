/* Ntddk.h: the spelling some sources use for <ntddk.h> (libndk WDK kit). */
#include <ntddk.h>
