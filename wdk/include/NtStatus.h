/* NtStatus.h: the spelling some sources use for <ntstatus.h> (libndk WDK kit). */
#include <ntstatus.h>
