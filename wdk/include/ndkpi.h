/*
 * ndkpi.h (libndk WDK kit) - the kit's types first, then libndk's NDKPI
 * (ndk/ndkpi.h), so <ndkpi.h> works before or after <ntddk.h>.
 */
#ifndef NDKWDK_NDKPI_H
#define NDKWDK_NDKPI_H
#include <wdm.h>
#include <ndk/ndkpi.h>
#endif
