/* Ntifs.h: the spelling some sources use for <ntifs.h> (libndk WDK kit). */
#include <ntifs.h>
