/* ntddk.h (libndk WDK kit): wdm.h and the address types drivers expect. */
#ifndef NDKWDK_NTDDK_H
#define NDKWDK_NTDDK_H
#include <wdm.h>
#include <ndkwdk/ws2.h>
#endif
