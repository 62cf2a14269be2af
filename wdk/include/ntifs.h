/* ntifs.h (libndk WDK kit): what the kit has of it is ntddk.h. */
#ifndef NDKWDK_NTIFS_H
#define NDKWDK_NTIFS_H
#include <ntddk.h>
#endif
