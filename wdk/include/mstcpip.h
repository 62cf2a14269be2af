/* mstcpip.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_MSTCPIP_H
#define NDKWDK_MSTCPIP_H
#include <ndkwdk/ws2.h>
#endif
